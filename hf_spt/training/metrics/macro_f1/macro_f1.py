"""Macro-averaged F1 as an `evaluate` metric module, shipped with hf_spt so it loads without the Hub.

F1 is computed per class over the classes present in the predictions or the references, then
averaged with equal weight per class (scikit-learn's `f1_score(average="macro")`; a class with
no true and no predicted positives does not enter the mean).
"""

import datasets
import evaluate
import numpy as np

_DESCRIPTION = "Unweighted mean over classes of per-class F1 = 2 TP / (2 TP + FP + FN)."
_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): predicted label ids.
    references (list of int): true label ids.
Returns:
    macro_f1 (float): in [0, 1].
"""


class MacroF1(evaluate.Metric):
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
        predictions, references = np.asarray(predictions), np.asarray(references)
        scores = []
        for label in np.union1d(predictions, references):
            true_positive = np.sum((predictions == label) & (references == label))
            false_positive = np.sum((predictions == label) & (references != label))
            false_negative = np.sum((predictions != label) & (references == label))
            scores.append(2 * true_positive / (2 * true_positive + false_positive + false_negative))
        return {"macro_f1": float(np.mean(scores))}
