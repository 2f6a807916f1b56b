"""Real pictures in LRA Image's form: scikit-learn's handwritten digits as grayscale pixel sequences.

`sklearn.datasets.load_digits` ships 1,797 pictures of 8x8 pixels (intensities 0-16, ten classes)
inside the scikit-learn wheel, so this task needs no download. Each picture becomes a sequence of
`image_size`² pixel tokens, row by row, in the same 256-value vocabulary as `image` and
`pathfinder` (pixel value v is token 4 + v), so SPT on one pixel task can start another:
intensities are scaled to 0-255 (v * 255 / 16, rounded) and, above the native 8x8, upsampled
bilinearly with PIL (16, 24 or 32 pixels a side: 256 to 1,024 tokens, LRA Image's length).

Splits are fixed, whatever `seed` and `num_train`: a stratified draw with `split_seed` sets aside
`num_test` pictures for test and `num_validation` for validation; the rest (1,197 by default) is
the training pool. `num_train` takes a stratified subset of that pool drawn with the run's `seed`
(each digit in proportion to its share of the pool, `picture_splits.training_subset`; Amos et al.'s
data-scarcity study), so seeds see different subsets and SPT pretrains on the subset only, as
self-pretraining should.

`write_digits_image_folder` writes the same pictures as PNGs in the layout `--task image
--data_dir` reads (`train/<class>/*.png` holding train and validation, `test/<class>/*.png`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import numpy as np
from datasets import Dataset, DatasetDict

from ..atomic_files import sync_all, write_png
from ..errors import UserInputError
from ..value_checks import NON_NEGATIVE_INT, POSITIVE_INT
from .common import PIXEL_VALUES, build_pixel_tokenizer, pixel_ids
from .picture_splits import stratified_order, training_subset
from .registry import Task, TaskPreset, register_task

NATIVE_SIZE = 8
DIGIT_INTENSITIES = 16  # load_digits' intensities run 0..16
LABEL_NAMES = [str(digit) for digit in range(10)]
INSTALL_HINT = "pip install scikit-learn  (or pip install 'hf-spt[digits]')"


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits: pictures (1797, 8, 8) of intensities 0-16 and labels (1797,); no download."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise UserInputError(f"The digits task reads scikit-learn's bundled pictures; install it: {INSTALL_HINT}") from None
    digits = load_digits()
    return digits.images, digits.target.astype(np.int64)


def digit_pixels(pictures: np.ndarray, image_size: int) -> np.ndarray:
    """Pictures (N, 8, 8) of intensities 0-16 as (N, image_size, image_size) grayscale 0-255 (uint8): scaled to
    0-255, then, above 8x8, upsampled with PIL's bilinear filter."""
    from PIL import Image

    scaled = np.rint(np.asarray(pictures, dtype=np.float64) * (PIXEL_VALUES - 1) / DIGIT_INTENSITIES).astype(np.uint8)
    if image_size == NATIVE_SIZE:
        return scaled
    return np.stack([np.asarray(Image.fromarray(picture).resize((image_size, image_size), Image.BILINEAR))
                     for picture in scaled])


def digits_splits(labels: np.ndarray, num_validation: int, num_test: int, split_seed: int) -> dict[str, np.ndarray]:
    """Indices of the fixed test and validation pictures and of the training pool (module docstring)."""
    if num_validation < 1 or num_test < 1 or num_validation + num_test >= len(labels):
        raise UserInputError(f"digits: num_validation and num_test must be at least 1 and leave training pictures "
                             f"(1,797 in all), got {num_validation} and {num_test}.")
    order = stratified_order(labels, np.random.default_rng(split_seed))
    return {"test": np.sort(order[:num_test]), "validation": np.sort(order[num_test:num_test + num_validation]),
            "train": np.sort(order[num_test + num_validation:])}


def check_image_size(image_size: int) -> None:
    """Refuse a side under the native 8 pixels (or not an int), before anything is read or written."""
    if not isinstance(image_size, int) or isinstance(image_size, bool) or image_size < NATIVE_SIZE:
        raise UserInputError(f"digits: image_size is the pictures' side in pixels, {NATIVE_SIZE} (native) or more "
                             f"(16, 24, 32 upsampled), got {image_size!r}.")


def digits_pictures(image_size: int, num_validation: int, num_test: int,
                    split_seed: int) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """What the task and the image folder both show: every picture as (image_size, image_size) grayscale pixels
    (`digit_pixels`), the labels, and the fixed split indices (`digits_splits`: the training pool whole)."""
    check_image_size(image_size)
    pictures, labels = digits_arrays()
    splits = digits_splits(labels, num_validation, num_test, split_seed)
    return digit_pixels(pictures, image_size), labels, splits


PRESET = TaskPreset(
    max_length=16 * 16,
    num_labels=10,
    mlm_probability=0.5,
    batch_size=32,
    model=dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, pooling="mean"),
)


@register_task(
    "digits",
    description="Real pictures as LRA Image: scikit-learn's handwritten digits (8x8, upsampled to image_size) as "
    "grayscale pixel tokens, fixed validation/test, 10 classes.",
    needs="nothing on disk (scikit-learn's bundled pictures: pip install scikit-learn)",
    preset=PRESET,
)
def load_digits_task(
    data_dir: str | None = None,
    seed: int = 0,
    image_size: int = 16,
    num_train: Annotated[int, POSITIVE_INT] | None = None,
    num_validation: Annotated[int, POSITIVE_INT] = 200,
    num_test: Annotated[int, POSITIVE_INT] = 400,
    split_seed: Annotated[int, NON_NEGATIVE_INT] = 0,
) -> Task:
    """The digits as image_size² pixel tokens; `seed` draws the `num_train` subset, held-out splits are fixed."""
    if data_dir is not None:
        raise UserInputError("digits reads scikit-learn's bundled pictures and takes no --data_dir; to read pictures "
                             "from a folder use --task image --data_dir (write_digits_image_folder writes these).")
    pixels, labels, splits = digits_pictures(image_size, num_validation, num_test, split_seed)
    splits["train"] = training_subset(splits["train"], labels, num_train, seed, task="digits")
    dataset = DatasetDict({split: Dataset.from_dict({"input_ids": [pixel_ids(pixels[i]) for i in splits[split]],
                                                     "labels": labels[splits[split]].tolist()})
                           for split in ("train", "validation", "test")})
    num_pixels = image_size * image_size
    return Task("digits", dataset, build_pixel_tokenizer(num_pixels), replace(PRESET, max_length=num_pixels),
                label_names=LABEL_NAMES)


def write_digits_image_folder(root: str | Path, image_size: int = 16, num_validation: int = 200, num_test: int = 400,
                              split_seed: int = 0) -> Path:
    """The digits task's pictures as PNGs under `root` (`train/<digit>/<index>.png`: training pool and validation;
    `test/<digit>/<index>.png`), the layout `--task image --data_dir root` reads, each written whole or not at all
    (`write_png`), the export synced to disk once at its end (`sync_all`). Returns `root`."""
    pixels, labels, splits = digits_pictures(image_size, num_validation, num_test, split_seed)
    root = Path(root)
    for folder, indices in (("train", np.concatenate([splits["train"], splits["validation"]])),
                            ("test", splits["test"])):
        for index in indices:
            write_png(root / folder / LABEL_NAMES[labels[index]] / f"{index:04d}.png", pixels[index])
    sync_all()
    return root


__all__ = ["NATIVE_SIZE", "digits_arrays", "digit_pixels", "digits_splits", "check_image_size", "digits_pictures",
           "load_digits_task", "write_digits_image_folder"]
