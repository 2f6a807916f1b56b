"""LRA Image: CIFAR-10 as sequences of 1024 grayscale pixels (one token per value 0-255), 10 classes.

Sources: `data_dir` as an image folder (`train/<class>/*.png`, `test/<class>/*.png`, any format
PIL reads; `datasets`' imagefolder builder) or a DatasetDict saved with `save_to_disk` (an image
column and a `label` column, e.g. the Hub's cifar10 saved once); with no `data_dir`,
`load_dataset("cifar10")` from the Hub. Train is split 90% / 10% into train and validation
(seeded), as LRA's 45k/5k; test is kept. Images of another size are resized to `image_size`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

from datasets import Dataset, DatasetDict, Image, load_dataset

from ..value_checks import FRACTION, POSITIVE_INT
from .common import (DataFormatError, build_pixel_tokenizer, carve_validation, grayscale_pixels, hub_dataset,
                     is_saved_dataset, load_saved_dataset, pixel_ids, require_path)
from .registry import Task, TaskPreset, register_task

LAYOUT = ("  DATA_DIR/train/<class name>/*.png and DATA_DIR/test/<class name>/*.png (an image folder),\n"
          "  or a DatasetDict saved with save_to_disk (an image column and a 'label' column; splits train, test)")
SOURCE = "load_dataset('cifar10') when online (then save_to_disk it for offline use), or your own images."


def image_columns(dataset: Dataset) -> tuple[str, str]:
    """Names of the image column and the label column of a `datasets` image data set."""
    images = [name for name, feature in dataset.features.items() if isinstance(feature, Image)]
    labels = [name for name in ("label", "labels", "fine_label") if name in dataset.column_names]
    if not images or not labels:
        raise DataFormatError(f"An image data set needs an Image column and a 'label' column; found {dataset.features}.")
    return images[0], labels[0]


def images_to_pixels(dataset: Dataset, image_size: int, num_proc: int | None) -> Dataset:
    """`input_ids` (image_size² grayscale pixel tokens) and `labels` from an image data set."""
    image_column, label_column = image_columns(dataset)

    def encode(batch: dict[str, list]) -> dict[str, list]:
        return {"input_ids": [pixel_ids(grayscale_pixels(image, image_size)) for image in batch[image_column]],
                "labels": batch[label_column]}

    return dataset.map(encode, batched=True, num_proc=num_proc, remove_columns=dataset.column_names,
                       desc="image to grayscale pixels")


def image_source(data_dir: str | None, cache_dir: str | None) -> DatasetDict:
    if data_dir is None:
        return hub_dataset("cifar10", "Pass --data_dir with an image folder or a saved DatasetDict instead.",
                           cache_dir=cache_dir)
    folder = require_path(data_dir, "Image data folder", LAYOUT, SOURCE)
    if is_saved_dataset(folder):
        return load_saved_dataset(folder)
    for split in ("train", "test"):
        require_path(Path(folder) / split, f"Image {split} folder", LAYOUT, SOURCE)
    return load_dataset("imagefolder", data_dir=str(folder), cache_dir=cache_dir)


PRESET = TaskPreset(
    max_length=1024,
    num_labels=10,
    mlm_probability=0.5,
    batch_size=50,
    model=dict(num_hidden_layers=3, hidden_size=64, num_attention_heads=4, intermediate_size=128, pooling="mean"),
)


@register_task(
    "image",
    description="LRA Image: CIFAR-10 as 1024 grayscale pixel tokens (train 90% / validation 10% / test), 10 classes.",
    needs="DATA_DIR = image folder ({train,test}/<class>/*.png) or saved DatasetDict; or the Hub's 'cifar10' when online",
    preset=PRESET,
)
def load_image(
    data_dir: str | None = None,
    seed: int = 0,
    image_size: Annotated[int, POSITIVE_INT] = 32,
    validation_fraction: Annotated[float, FRACTION] = 0.1,
    num_proc: Annotated[int, POSITIVE_INT] | None = None,
    cache_dir: str | None = None,
) -> Task:
    """Grayscale pixel sequences of length image_size²; validation carved from train with `seed`."""
    source = image_source(data_dir, cache_dir)
    for split in ("train", "test"):
        if split not in source or len(source[split]) == 0:
            raise DataFormatError(f"Image data from {data_dir or 'the Hub'} has no (or an empty) {split!r} split. "
                                  f"Expected layout:\n{LAYOUT}")
    label_column = image_columns(source["train"])[1]
    label_names = getattr(source["train"].features[label_column], "names", None) or [
        str(i) for i in range(max(source["train"][label_column]) + 1)]
    train, validation = carve_validation(source["train"], validation_fraction, seed)
    dataset = DatasetDict({split: images_to_pixels(data, image_size, num_proc)
                           for split, data in (("train", train), ("validation", validation), ("test", source["test"]))})
    num_pixels = image_size * image_size
    preset = replace(PRESET, max_length=num_pixels, num_labels=len(label_names))
    return Task("image", dataset, build_pixel_tokenizer(num_pixels), preset, label_names=[str(n) for n in label_names])


__all__ = ["image_columns", "images_to_pixels", "image_source", "load_image"]
