"""Accuracy as an `evaluate` metric module, shipped with hf_spt so it loads without the Hub."""

import datasets
import evaluate
import numpy as np

_DESCRIPTION = "Share of predictions equal to their reference label."
_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): predicted label ids.
    references (list of int): true label ids.
Returns:
    accuracy (float): in [0, 1].
"""


class Accuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}
            ),
        )

    def _compute(self, predictions, references):
        return {"accuracy": float(np.mean(np.asarray(predictions) == np.asarray(references)))}
