"""Save a grid of generated Pathfinder images, positive and negative, at 32, 64 and 128 px.

    python run_scripts/pathfinder_examples.py [--output docs/pathfinder_examples.png] [--seed 0]
"""

from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from hf_spt.tasks.pathfinder_generator import generate_pathfinder_image

SIZES = (32, 64, 128)
PER_CLASS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="docs/pathfinder_examples.png")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    figure, axes = plt.subplots(len(SIZES), 2 * PER_CLASS, figsize=(2 * PER_CLASS * 1.6, len(SIZES) * 1.7))
    for row, size in enumerate(SIZES):
        for column in range(2 * PER_CLASS):
            positive = column < PER_CLASS
            axis = axes[row, column]
            axis.imshow(generate_pathfinder_image(rng, positive, image_size=size), cmap="gray", vmin=0, vmax=255)
            axis.set_xticks([])
            axis.set_yticks([])
            axis.set_title(f"{'connected' if positive else 'not connected'}, {size}px", fontsize=7)
    figure.tight_layout()
    figure.savefig(args.output, dpi=110)
    print(f"saved {args.output}")


if __name__ == "__main__":
    main()
