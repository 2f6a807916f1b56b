"""LRA Pathfinder (32x32, 1024 pixels) and Path-X (128x128, 16384): are the two marked points connected?

From the released layout in `data_dir` (LRA's "hard" difficulty by default):
    DATA_DIR/curv_contour_length_14/imgs/<n>/sample_<k>.png
    DATA_DIR/curv_contour_length_14/metadata/<n>.npy   text lines; field 0 the subfolder ("imgs/<n>"),
                                                        field 1 the file name, field 3 the label (0/1)
split 80/10/10 (shuffled with `seed`); or, with no `data_dir`, from `pathfinder_generator` (no
download). Pixels are tokens 4..259 of the same 256-value vocabulary as `image`, so SPT can
pretrain on one and fine-tune on the other (--pretrain_task).

`label` swaps the path label for a control label computed from the same pixels, to tell a model that
cannot see the path from one that cannot read the image's geometry: `more_lit_left` (1 when the left
half holds more lit pixels than the right: needs each pixel's column, its position modulo the width)
or `more_lit_top` (the same for the top and bottom halves: needs its row). Ties are drawn at random
(seeded), so both classes stay near half.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import numpy as np
from datasets import Dataset, DatasetDict

from ..errors import MissingInputError, UserInputError
from ..models.tokenization_spt import NUM_SPECIAL_TOKENS
from ..value_checks import NON_NEGATIVE_INT, POSITIVE_INT
from .common import (DataFormatError, build_pixel_tokenizer, carve_validation, grayscale_pixels, pixel_ids,
                     read_utf8, require_path, rows_to_dataset)
from .pathfinder_generator import generate_pathfinder
from .registry import Task, TaskPreset, register_task

logger = logging.getLogger(__name__)

LAYOUT = ("  DATA_DIR/{difficulty}/imgs/<n>/sample_<k>.png and DATA_DIR/{difficulty}/metadata/<n>.npy\n"
          "  (metadata: text lines 'imgs/<n> sample_<k>.png <k> <label> ...')")
SOURCE = ("the LRA release (lra_release.gz from google-research/long-range-arena: lra_release/pathfinder32, "
          "pathfinder128 for Path-X), or `python run_scripts/generate_pathfinder.py`, or no --data_dir to generate.")


NUMPY_MAGIC = b"\x93NUMPY"
DIFFICULTIES = {"easy": "curv_baseline", "intermediate": "curv_contour_length_9", "hard": "curv_contour_length_14"}
"""The tfds split names of LRA's Pathfinder and the release folders they read."""


def metadata_lines(metadata: Path) -> list[list[str]]:
    """The whitespace-separated fields of each line of a metadata file: LRA's text lines, or the same rows saved
    with `np.save` as an array of strings (what a re-run of the public generator may write)."""
    with open(metadata, "rb") as handle:
        binary = handle.read(len(NUMPY_MAGIC)) == NUMPY_MAGIC
    if not binary:
        return [line.split() for line in read_utf8(metadata).splitlines()]
    try:
        rows = np.load(metadata, allow_pickle=False)
    except ValueError as error:
        raise DataFormatError(f"{metadata} is a binary NumPy file (np.save) that needs pickle to read ({error}); "
                              "expected LRA's text lines 'imgs/<n> sample_<k>.png <k> <label> ...' or an np.save'd "
                              "array of such rows as strings.") from None
    if rows.dtype.kind not in "US" or rows.ndim != 2:
        raise DataFormatError(f"{metadata} is a binary NumPy file holding a {rows.dtype} array of shape {rows.shape}; "
                              "expected LRA's text lines 'imgs/<n> sample_<k>.png <k> <label> ...' or a 2-D array "
                              "of such rows as strings.")
    return [[str(field) for field in row] for row in rows]


def read_pathfinder_metadata(path: str, fingerprint: str) -> Iterator[dict]:
    """{"image_path", "labels"} for every line of every metadata file under the difficulty folder `path`. An
    empty image file (the release ships one: curv_baseline/imgs/0/sample_172.png) is skipped, as LRA's own
    pipeline skips it, and the skipped files are counted in the log."""
    del fingerprint  # only keys the cache
    root = Path(path)
    metadata_files = sorted((root / "metadata").glob("*.npy"), key=lambda f: (len(f.stem), f.stem))
    skipped = []
    for metadata in metadata_files:
        for line_number, fields in enumerate(metadata_lines(metadata), start=1):
            if not fields:
                continue
            if len(fields) < 4:
                raise DataFormatError(f"{metadata}, line {line_number}: expected at least 4 space-separated fields "
                                      f"(subfolder, file name, index, label), found {len(fields)}.")
            if fields[3] not in ("0", "1"):
                raise DataFormatError(f"{metadata}, line {line_number}: unknown label {fields[3]!r}; expected 0 or 1.")
            image = root / fields[0] / fields[1]
            if not image.is_file():
                raise MissingInputError(f"{metadata}, line {line_number}: image {image} does not exist.")
            if image.stat().st_size == 0:
                skipped.append(str(image))
                continue
            yield {"image_path": str(image), "labels": int(fields[3])}
    if skipped:
        logger.warning("Pathfinder: skipped %d empty image file(s) under %s (as LRA's pipeline does): %s", len(skipped),
                       root, ", ".join(skipped[:5]) + (" ..." if len(skipped) > 5 else ""))


def generated_rows(num_images: int, seed: int, image_size: int, contour_length: int,
                   num_distractors: int = 2) -> Iterator[dict]:
    """Generated images as rows, 1000 at a time (cached by `Dataset.from_generator` under these arguments)."""
    for first in range(0, num_images, 1000):
        count = min(1000, num_images - first)
        images, labels = generate_pathfinder(count, seed * 1_000_003 + first, image_size, contour_length,
                                             num_distractors)
        for image, label in zip(images, labels):
            yield {"input_ids": pixel_ids(image), "labels": int(label)}


def released_image(path: str, image_size: int):
    """The PIL image at `path`, which must be `image_size` pixels square: a release of another size is another task
    (pathfinder128 is Path-X), never resized silently."""
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(path)
    except UnidentifiedImageError:
        raise DataFormatError(f"{path} is not an image PIL can read; replace or remove it (and its metadata line)."
                              ) from None
    if image.size != (image_size, image_size):
        raise DataFormatError(f"{path} is {image.size[0]}x{image.size[1]} pixels, not {image_size}x{image_size}: "
                              "pathfinder32 is --task pathfinder, pathfinder128 --task pathx (or give "
                              "--task_options '{\"image_size\": N}' for N x N images).")
    return image


def load_released(folder: Path, image_size: int, num_proc: int | None, cache_dir: str | None) -> Dataset:
    rows = rows_to_dataset(read_pathfinder_metadata, folder, cache_dir)

    def encode(batch: dict[str, list]) -> dict[str, list]:
        from PIL import Image

        return {"input_ids": [pixel_ids(grayscale_pixels(released_image(path, image_size), image_size))
                              for path in batch["image_path"]]}

    return rows.map(encode, batched=True, num_proc=num_proc, remove_columns=["image_path"], desc="reading PNGs")


LABELS = {"path": ["disconnected", "connected"], "more_lit_left": ["right_half", "left_half"],
          "more_lit_top": ["bottom_half", "top_half"]}


def half_labels(images: np.ndarray, kind: str, rng: np.random.Generator) -> np.ndarray:
    """Control labels of (N, H, W) grayscale images: 1 where the left (`more_lit_left`) or top (`more_lit_top`)
    half holds more lit (non-zero) pixels than the other half; ties drawn from `rng`."""
    lit = np.asarray(images) > 0
    first, second = np.split(lit, [lit.shape[-1] // 2], axis=2 if kind == "more_lit_left" else 1)
    score = first.sum((1, 2)).astype(np.int64) - second.sum((1, 2))
    return np.where(score == 0, rng.integers(0, 2, len(lit)), score > 0).astype(np.int64)


def relabelled(dataset: Dataset, kind: str, seed: int, image_size: int) -> Dataset:
    """`dataset` with the control label `kind` in place of the path label (a batch's ties seeded by its first row)."""
    def relabel(batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        images = np.array(batch["input_ids"]).reshape(-1, image_size, image_size) - NUM_SPECIAL_TOKENS
        return {"labels": half_labels(images, kind, np.random.default_rng([seed, indices[0]])).tolist()}

    return dataset.map(relabel, batched=True, batch_size=1000, with_indices=True, desc=f"labelling {kind}")


PRESET_MODEL = dict(num_hidden_layers=4, hidden_size=128, num_attention_heads=8, intermediate_size=128, pooling="mean")


def pathfinder_preset(image_size: int) -> TaskPreset:
    """Both variants' preset (LRA sizes, Amos et al.'s 50% masking); the length is image_size² pixels."""
    return TaskPreset(max_length=image_size * image_size, num_labels=2, mlm_probability=0.5, batch_size=32,
                      model=PRESET_MODEL)


def build_pathfinder(name: str, data_dir: str | None, seed: int, image_size: int, difficulty: str,
                     num_images: int, contour_length: int, num_proc: int | None, cache_dir: str | None,
                     num_distractors: int = 2, label: str = "path") -> Task:
    """Released files or generated images (`contour_length` dashes per path, `num_distractors` short snakes),
    split 80/10/10, labelled by path or by a control label (module docstring)."""
    if label not in LABELS:
        raise UserInputError(f"{name}: unknown label {label!r}; choose one of {', '.join(LABELS)}.")
    layout = LAYOUT.format(difficulty=difficulty)
    notes: list[str] = []
    if data_dir is None:
        if num_distractors < 0 or contour_length < 1:
            raise UserInputError(f"{name}: contour_length must be at least 1 and num_distractors at least 0, got "
                                 f"{contour_length} and {num_distractors}.")
        everything = Dataset.from_generator(generated_rows, cache_dir=cache_dir, gen_kwargs=dict(
            num_images=num_images, seed=seed, image_size=image_size, contour_length=contour_length,
            num_distractors=num_distractors))
    else:
        folder = Path(data_dir) / DIFFICULTIES.get(difficulty, difficulty)
        if not folder.is_dir() and Path(data_dir).is_dir():
            present = sorted(p.name for p in Path(data_dir).iterdir() if p.is_dir() and p.name.startswith("curv_"))
            raise MissingInputError(f"{name}: difficulty {difficulty!r} has no folder {folder}; the folders present: "
                                    f"{', '.join(present) or 'none (is DATA_DIR one level too high or low?)'}. Names: "
                                    f"the folder's, or {', '.join(f'{k} ({v})' for k, v in DIFFICULTIES.items())}.")
        folder = require_path(folder, f"{name} data folder", layout, SOURCE)
        require_path(folder / "metadata", f"{name} metadata folder", layout, SOURCE)
        everything = load_released(folder, image_size, num_proc, cache_dir)
        listed = sum(1 for metadata in (folder / "metadata").glob("*.npy") for fields in metadata_lines(metadata)
                     if fields)
        if listed > len(everything):  # the rows (cached or not) against the metadata: the empty images skipped
            notes.append(f"{listed - len(everything)} empty image file(s) of {folder} skipped, as LRA's pipeline "
                         "skips them")
    if label != "path":
        everything = relabelled(everything, label, seed, image_size)
    rest, test = carve_validation(everything, 0.1, seed)
    train, validation = carve_validation(rest, 1 / 9, seed)
    dataset = DatasetDict(train=train, validation=validation, test=test)
    return Task(name, dataset, build_pixel_tokenizer(image_size * image_size), pathfinder_preset(image_size),
                label_names=LABELS[label], data_notes=notes)


def register_variant(name: str, image_size: int, description: str, release: str) -> Callable[..., Task]:
    """Register the Pathfinder variant `name`, whose images are `image_size` pixels square by default."""

    def load(
        data_dir: str | None = None,
        seed: int = 0,
        image_size: Annotated[int, POSITIVE_INT] = image_size,
        difficulty: str = "curv_contour_length_14",
        num_images: Annotated[int, POSITIVE_INT] = 20000,
        contour_length: Annotated[int, POSITIVE_INT] = 14,
        num_proc: Annotated[int, POSITIVE_INT] | None = None,
        cache_dir: str | None = None,
        num_distractors: Annotated[int, NON_NEGATIVE_INT] = 2,
        label: str = "path",
    ) -> Task:
        """The variant from `data_dir`, or `num_images` generated ones (`image_size` 32, 64 or 128; shorter paths
        and fewer distractors make the generated task easier); `label`: the path label or a control label."""
        return build_pathfinder(name, data_dir, seed, image_size, difficulty, num_images, contour_length,
                                num_proc, cache_dir, num_distractors, label)

    load.__name__ = load.__qualname__ = f"load_{name}"
    needs = f"DATA_DIR/curv_contour_length_14/{{imgs,metadata}}/ (LRA {release}), or nothing: generated"
    return register_task(name, description, needs, pathfinder_preset(image_size))(load)


load_pathfinder = register_variant(
    "pathfinder", 32, "LRA Pathfinder: are two marked points joined by a dashed path? 32x32 = 1024 pixel tokens, "
    "2 classes.", "pathfinder32")
load_pathx = register_variant("pathx", 128, "LRA Path-X: Pathfinder at 128x128 = 16384 pixel tokens, 2 classes.",
                              "pathfinder128")


__all__ = ["DIFFICULTIES", "metadata_lines", "released_image", "LABELS", "half_labels", "relabelled", "read_pathfinder_metadata", "load_released", "pathfinder_preset",
           "build_pathfinder", "load_pathfinder", "load_pathx"]
