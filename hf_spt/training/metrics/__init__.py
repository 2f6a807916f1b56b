"""Evaluation metrics through `evaluate`, with the ones hf_spt reports shipped inside the package.

`evaluate.load("accuracy")` fetches its module from the Hub, which fails offline; the modules of
`SHIPPED_METRICS` live next to this file and load from disk. Any other name goes to the Hub.
"""

from __future__ import annotations

from pathlib import Path

import evaluate

from ...errors import UserInputError

METRICS_DIR = Path(__file__).resolve().parent
SHIPPED_METRICS = ("accuracy", "macro_f1")


def load_metric(name: str) -> evaluate.EvaluationModule:
    """The `evaluate` module `name`: a shipped one from disk, any other from the Hub."""
    if name in SHIPPED_METRICS:
        return evaluate.load(str(METRICS_DIR / name))
    try:
        return evaluate.load(name)
    except (FileNotFoundError, ConnectionError, OSError) as error:
        raise UserInputError(
            f"Metric {name!r} is not shipped with hf_spt ({', '.join(SHIPPED_METRICS)}) and could not be loaded "
            f"from the Hugging Face Hub ({error}). Use a shipped metric, or a local metric script folder, "
            "or connect to the Hub (unset HF_HUB_OFFLINE)."
        ) from error


__all__ = ["METRICS_DIR", "SHIPPED_METRICS", "load_metric"]
