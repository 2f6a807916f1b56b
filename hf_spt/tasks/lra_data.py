"""Where each Long Range Arena task's files sit under one data root, and which are missing.

`run_scripts/run_lra.py --data_root ROOT` looks for one folder per task, under the names the
releases use (the first name is the one to create; the others are accepted):

    ROOT/listops/      basic_{train,val,test}.tsv            (lra_release/listops-1000)
    ROOT/text/         aclImdb layout or a saved DatasetDict (aclImdb)
    ROOT/retrieval/    new_aan_pairs.{train,eval,test}.tsv   (lra_release/tsv_data)
    ROOT/image/        {train,test}/<class>/*.png or a saved DatasetDict (cifar10)
    ROOT/pathfinder/   curv_contour_length_14/{imgs,metadata} (lra_release/pathfinder32)

A folder counts as present only when the files its loader reads are there (an empty `text/train`
or Pathfinder `metadata` folder is no data), so a missing task is reported before any training,
with its loader's expected layout (each loader's `LAYOUT`).
ListOps and Pathfinder can be generated instead (`generated`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import image, listops, pathfinder, retrieval, text
from .common import is_saved_dataset
from .listops_generator import SPLIT_FILES as LISTOPS_FILES
from .retrieval import SPLIT_FILES as AAN_FILES

LRA_TASKS = ("listops", "text", "retrieval", "image", "pathfinder")
PATHFINDER_DIFFICULTY = "curv_contour_length_14"  # the folder of the LRA release's Pathfinder task


@dataclass(frozen=True)
class LraData:
    """One task's folder names under the data root, the test that its files are there, and what to put there."""

    folders: tuple[str, ...]
    present: Callable[[Path], bool]
    layout: str
    source: str
    generated: bool


def _all_files(names) -> Callable[[Path], bool]:
    return lambda folder: all((folder / name).is_file() for name in names)


def _has_files(folder: Path, pattern: str) -> bool:
    """Whether `folder` holds a file matching `pattern` (an empty or missing folder holds none)."""
    return any(path.is_file() for path in folder.glob(pattern))


def _imdb_folder(folder: Path) -> bool:
    """A saved DatasetDict, or reviews (`*.txt`) of both classes in both splits, as `text.read_imdb_folder` reads."""
    return is_saved_dataset(folder) or all(_has_files(folder / split / label, "*.txt")
                                           for split in ("train", "test") for label in text.LABEL_NAMES)


def _image_folder(folder: Path) -> bool:
    """A saved DatasetDict, or image files in class folders of both splits (`train/<class>/*`, `test/<class>/*`)."""
    return is_saved_dataset(folder) or all(_has_files(folder / split, "*/*") for split in ("train", "test"))


def _pathfinder_folder(folder: Path) -> bool:
    """Metadata files (`metadata/*.npy`, which `pathfinder.read_pathfinder_metadata` reads) of the LRA difficulty."""
    return _has_files(folder / PATHFINDER_DIFFICULTY / "metadata", "*.npy")


LRA_DATA: dict[str, LraData] = {
    "listops": LraData(("listops", "listops-1000"), _all_files(LISTOPS_FILES.values()), listops.LAYOUT, listops.SOURCE,
                       generated=True),
    "text": LraData(("text", "aclImdb"), _imdb_folder, text.LAYOUT, text.SOURCE, generated=False),
    "retrieval": LraData(("retrieval", "tsv_data"), _all_files(AAN_FILES.values()), retrieval.LAYOUT,
                         retrieval.SOURCE, generated=False),
    "image": LraData(("image", "cifar10"), _image_folder, image.LAYOUT, image.SOURCE, generated=False),
    "pathfinder": LraData(("pathfinder", "pathfinder32"), _pathfinder_folder,
                          pathfinder.LAYOUT.format(difficulty=PATHFINDER_DIFFICULTY), pathfinder.SOURCE,
                          generated=True),
}


def find_lra_data(data_root: str | Path | None, tasks: tuple[str, ...] = LRA_TASKS) -> dict[str, Path | None]:
    """{task: its data folder under `data_root`, or None when no folder there holds its files}."""
    found: dict[str, Path | None] = {}
    for task in tasks:
        candidates = [Path(data_root) / name for name in LRA_DATA[task].folders] if data_root else []
        found[task] = next((folder for folder in candidates if folder.is_dir() and LRA_DATA[task].present(folder)), None)
    return found


def _one_level_down(data_root: str | Path | None, task: str) -> Path | None:
    """The task's data folder in a subfolder of `data_root` (lra_release/lra_release/...), if one holds it."""
    if not data_root or not Path(data_root).is_dir():
        return None
    for child in sorted(p for p in Path(data_root).iterdir() if p.is_dir()):
        found = find_lra_data(child, (task,))[task]
        if found is not None:
            return found
    return None


def missing_data_report(data_root: str | Path | None, found: dict[str, Path | None]) -> str:
    """What to put where for every task without data (empty when none is missing): the loader's layout,
    DATA_DIR spelled as the folder to create, and where the files come from."""
    lines = []
    for task, folder in found.items():
        if folder is not None:
            continue
        spec = LRA_DATA[task]
        target = Path(data_root or "DATA_ROOT") / spec.folders[0]
        fallback = "generated instead" if spec.generated else "skipped"
        lines += [f"{task}: no data under {target} ({fallback}). Put there:",
                  spec.layout.replace("DATA_DIR", str(target)), f"  from {spec.source}"]
        deeper = _one_level_down(data_root, task)
        if deeper is not None:
            lines.append(f"  Found it one level down, in {deeper}: pass --data_root {deeper.parent} (a release "
                         "unpacked into a folder of its own name).")
    return "\n".join(lines)


__all__ = ["LRA_TASKS", "PATHFINDER_DIFFICULTY", "LRA_DATA", "LraData", "find_lra_data", "missing_data_report"]
