"""Pathfinder-style images (Linsley et al. 2018; LRA Pathfinder and Path-X), generated with numpy.

Each image holds two long curved dashed paths ("snakes") of `contour_length` dashes and a few
short distractor snakes. Two end points are marked with discs: in a positive image both ends of
the same long path, in a negative image one end of each long path. The label says whether the
marked points are connected. Dash length, gap, stroke and disc size scale with the image size
(32, 64, 128 px; Path-X is 128). Paths may cross, as in the original.

`write_pathfinder` writes the released layout, which the `pathfinder` task reads with --data_dir; its command
(`hf_spt.scripts.generate_pathfinder`):
    python run_scripts/generate_pathfinder.py --output_dir data/pathfinder32 --num_images 2000 --image_size 32
giving DATA_DIR/curv_contour_length_14/imgs/<n>/sample_<k>.png and metadata/<n>.npy
(text lines "imgs/<n> sample_<k>.png <k> <label> <image_size> <contour_length>").
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..atomic_files import sync_all, write_png, write_text

IMAGES_PER_FOLDER = 1000


def _snake(rng: np.random.Generator, size: int, num_dashes: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates (K, 2) of a dashed smooth random curve, and its two end points (2, 2)."""
    dash, gap, step = 2.0 * scale, 1.5 * scale, 0.5
    margin = 2.0 * scale
    position = rng.uniform(margin, size - margin, 2)
    heading = rng.uniform(0, 2 * np.pi)
    points, start = [], position.copy()
    for _ in range(num_dashes):
        heading += rng.normal(0, 0.35)
        for length, drawn in ((dash, True), (gap, False)):
            direction = np.array([np.cos(heading), np.sin(heading)])
            ahead = position + direction * (length + margin)
            if not ((0 <= ahead) & (ahead < size)).all():  # turn back inwards at the border
                heading = np.arctan2(size / 2 - position[1], size / 2 - position[0]) + rng.normal(0, 0.3)
                direction = np.array([np.cos(heading), np.sin(heading)])
            offsets = np.arange(0, length, step)[:, None] * direction
            if drawn:
                points.append(position + offsets)
                end = position + offsets[-1]
            position = np.clip(position + direction * length, 0, size - 1)
    return np.concatenate(points), np.stack([start, end])


def _stamp(canvas: np.ndarray, points: np.ndarray, radius: float) -> None:
    """Paint a disc of `radius` around every point (vectorised over points and disc offsets)."""
    reach = int(np.ceil(radius))
    dy, dx = np.mgrid[-reach : reach + 1, -reach : reach + 1]
    disc = np.stack([dx[dx**2 + dy**2 <= radius**2], dy[dx**2 + dy**2 <= radius**2]], axis=1)
    pixels = (np.rint(points)[:, None, :] + disc[None]).reshape(-1, 2).astype(np.int64)
    size = canvas.shape[0]
    pixels = pixels[((pixels >= 0) & (pixels < size)).all(axis=1)]
    canvas[pixels[:, 1], pixels[:, 0]] = 255


@dataclass
class PathfinderDrawing:
    """One image and what was drawn on it: the two long paths (points in drawing order, (K, 2) as x, y),
    their end points ((2, 2) each: first and last drawn point), the two marked points and the label."""

    image: np.ndarray
    paths: list[np.ndarray]
    ends: list[np.ndarray]
    marked: np.ndarray
    label: int


def draw_pathfinder(
    rng: np.random.Generator, positive: bool, image_size: int = 32, contour_length: int = 14, num_distractors: int = 2
) -> PathfinderDrawing:
    """One (image_size, image_size) uint8 image and its geometry; `positive` = the two marked discs are the
    two ends of one long path (else one end of each)."""
    scale = image_size / 32
    canvas = np.zeros((image_size, image_size), dtype=np.uint8)
    stroke = 0.3 * scale
    first, first_ends = _snake(rng, image_size, contour_length, scale)
    second, second_ends = _snake(rng, image_size, contour_length, scale)
    for _ in range(num_distractors):
        _stamp(canvas, _snake(rng, image_size, max(2, contour_length // 3), scale)[0], stroke)
    _stamp(canvas, first, stroke)
    _stamp(canvas, second, stroke)
    marked = first_ends if positive else np.stack([first_ends[0], second_ends[int(rng.integers(2))]])
    _stamp(canvas, marked, 1.5 * scale)
    return PathfinderDrawing(canvas, [first, second], [first_ends, second_ends], marked, int(positive))


def generate_pathfinder_image(
    rng: np.random.Generator, positive: bool, image_size: int = 32, contour_length: int = 14, num_distractors: int = 2
) -> np.ndarray:
    """One (image_size, image_size) uint8 image; `positive` = the two marked discs lie on one path."""
    return draw_pathfinder(rng, positive, image_size, contour_length, num_distractors).image


def pathfinder_drawings(
    num_images: int, seed: int = 0, image_size: int = 32, contour_length: int = 14, num_distractors: int = 2
) -> Iterator[PathfinderDrawing]:
    """The drawings behind `generate_pathfinder(num_images, seed, ...)`, in its order (balanced, shuffled labels)."""
    rng = np.random.default_rng(seed)
    labels = np.arange(num_images) % 2
    rng.shuffle(labels)
    for label in labels:
        yield draw_pathfinder(rng, bool(label), image_size, contour_length, num_distractors)


def generate_pathfinder(
    num_images: int, seed: int = 0, image_size: int = 32, contour_length: int = 14, num_distractors: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, S, S) uint8 and balanced labels (N,) in {0, 1}, seeded."""
    drawings = list(pathfinder_drawings(num_images, seed, image_size, contour_length, num_distractors))
    if not drawings:
        return np.zeros((0, image_size, image_size), np.uint8), np.zeros(0, np.int64)
    return np.stack([d.image for d in drawings]), np.array([d.label for d in drawings])


def difficulty_folder(output_dir: str | Path, contour_length: int) -> Path:
    """The folder of a release's difficulty (`curv_contour_length_<n>`) that images of `contour_length` go to."""
    return Path(output_dir) / f"curv_contour_length_{contour_length}"


def write_pathfinder(
    output_dir: str | Path, num_images: int, seed: int = 0, image_size: int = 32, contour_length: int = 14
) -> Path:
    """Write generated images in the released layout, each file whole or not at all and the export synced to disk once
    at its end (`hf_spt.atomic_files`); returns the difficulty folder."""
    root = difficulty_folder(output_dir, contour_length)
    images, labels = generate_pathfinder(num_images, seed, image_size, contour_length)
    (root / "metadata").mkdir(parents=True, exist_ok=True)
    for folder_index, first in enumerate(range(0, num_images, IMAGES_PER_FOLDER)):
        lines = []
        (root / "imgs" / str(folder_index)).mkdir(parents=True, exist_ok=True)
        for k in range(first, min(first + IMAGES_PER_FOLDER, num_images)):
            write_png(root / "imgs" / str(folder_index) / f"sample_{k}.png", images[k])
            lines.append(f"imgs/{folder_index} sample_{k}.png {k} {labels[k]} {image_size} {contour_length}\n")
        write_text(root / "metadata" / f"{folder_index}.npy", "".join(lines))
    sync_all()
    return root
