"""Writers of tiny data sets in each task's published on-disk layout, shared by the task tests."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from hf_spt.tasks.listops_generator import SPLIT_FILES as LISTOPS_FILES
from hf_spt.tasks.listops_generator import generate_listops_example, write_listops_tsv
from hf_spt.tasks.pathfinder_generator import write_pathfinder
from hf_spt.tasks.retrieval import SPLIT_FILES as AAN_FILES

SHORT_LISTOPS = dict(min_length=5, max_length=60)


def write_listops(folder: Path, rows_per_split: int = 12) -> Path:
    rng = random.Random(0)
    for file_name in LISTOPS_FILES.values():
        write_listops_tsv([generate_listops_example(rng, **SHORT_LISTOPS) for _ in range(rows_per_split)],
                          folder / file_name)
    return folder


def write_imdb(folder: Path, reviews_per_class: int = 6) -> Path:
    for split in ("train", "test"):
        for label in ("neg", "pos"):
            (folder / split / label).mkdir(parents=True)
            for k in range(reviews_per_class):
                mood = "dreadful, dull" if label == "neg" else "wonderful, moving"
                (folder / split / label / f"{k}_7.txt").write_text(f"Review {k}: a {mood} film. Ünïcode ok.")
    return folder


def write_aan(folder: Path, rows_per_split: int = 8) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for file_name in AAN_FILES.values():
        lines = [f"{k % 2}\tP{k}\tQ{k}\tpaper {k} on parsing\tpaper {k} cites {'it' if k % 2 else 'nothing'}\n"
                 for k in range(rows_per_split)]
        (folder / file_name).write_text("".join(lines))
    return folder


def write_image_folder(folder: Path, per_class: int = 6, size: int = 8) -> Path:
    from PIL import Image

    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        for name in ("cat", "dog"):
            (folder / split / name).mkdir(parents=True)
            for k in range(per_class):
                pixels = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / split / name / f"{k}.png")
    return folder


def write_pathfinder_release(folder: Path, num_images: int = 30) -> Path:
    write_pathfinder(folder, num_images, seed=0, image_size=32)
    return folder


def write_custom_csv(folder: Path, rows: int = 24) -> dict[str, str]:
    """train.csv and test.csv with `text` and string labels (validation carved from train)."""
    folder.mkdir(parents=True, exist_ok=True)
    moods = ("happy", "sad", "angry")
    files = {}
    for split, count in (("train", rows), ("test", 9)):
        lines = ["text,label\n"] + [f"\"I feel {moods[k % 3]}, {k}\",{moods[k % 3]}\n" for k in range(count)]
        (folder / f"{split}.csv").write_text("".join(lines))
        files[split] = str(folder / f"{split}.csv")
    return files
