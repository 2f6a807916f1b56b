"""Figures written to PNG files, for the analysis report and the ablation report alike.

Plots are drawn on matplotlib's non-interactive Agg back-end (no display on training machines),
laid out tightly, saved and closed, so that a report drawing dozens of figures holds none open.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def saved_figure(path: str | Path, dpi: int = 80, **subplots: Any) -> Iterator[tuple[Any, Any]]:
    """`plt.subplots(**subplots)` on the Agg back-end; on exit the figure is saved to `path` (tight layout) and closed.

    Yields (figure, axes). Nothing is written when the block raises; the figure is closed either way.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(**subplots)
    try:
        yield figure, axes
        figure.tight_layout()
        figure.savefig(path, dpi=dpi)
    finally:
        plt.close(figure)


__all__ = ["saved_figure"]
