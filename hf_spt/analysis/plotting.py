"""Figures written to PNG files, for the analysis report and the ablation report alike.

Plots are drawn on matplotlib's non-interactive Agg back-end (no display on training machines),
laid out tightly, saved and closed, so that a report drawing dozens of figures holds none open. A figure is
written whole or not at all (`hf_spt.atomic_files.replaced_file`), as every file of a report.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..atomic_files import replaced_file


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
        with replaced_file(path, "wb") as stream:
            figure.savefig(stream, format=Path(path).suffix[1:], dpi=dpi)
    finally:
        plt.close(figure)


__all__ = ["saved_figure"]
