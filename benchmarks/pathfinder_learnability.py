"""Is a generated Pathfinder configuration learnable at all? A small CNN reference on the same images.

A budget study can only show SPT's gain where some arm leaves chance. Before spending hours of
Transformer training on a configuration, this trains a convolutional network (which has locality
built in) on the images the `pathfinder` task generates with the same options and the same
80/10/10 split sizes, and prints train, validation and test accuracy per epoch. A configuration the
CNN cannot learn is no place to look for SPT's gain; one it learns is where the Transformer arms go.
`--model transformer` trains an SPT classifier (pixel tokens, mean pooling) in the same plain loop,
from random weights or from a saved SPT checkpoint (`--init_from`), to see whether it fits the
training images at all. `--label` swaps the path label for a control label computed from the same
images, each balanced (the half of the images with more lit pixels: a bag of pixels suffices; more lit
pixels in the top half than in the bottom: needs each pixel's row; in the left half than in the right:
needs its column), to tell a model that cannot learn at all from one that cannot see the path.

    python benchmarks/pathfinder_learnability.py --image_size 24 --contour_length 4 --num_distractors 0 \
        --num_images 8000 --epochs 8

Prints one JSON line per epoch and a final summary line (best validation epoch and its test accuracy).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from torch import nn

from hf_spt.training.hub_kernels import WITHOUT_HUB_KERNELS
from hf_spt.models.tokenization_spt import NUM_SPECIAL_TOKENS
from hf_spt.tasks.common import PIXEL_VALUES
from hf_spt.tasks.pathfinder import half_labels
from hf_spt.tasks.pathfinder_generator import generate_pathfinder


def reference_cnn(channels: int = 32, depth: int = 6) -> nn.Module:
    """3x3 conv blocks (BatchNorm, ReLU), every second one dilated, then global max and mean pooling into 2 logits."""
    layers: list[nn.Module] = []
    width = 1
    for block in range(depth):
        dilation = 2 if block % 2 else 1
        layers += [nn.Conv2d(width, channels, 3, padding=dilation, dilation=dilation), nn.BatchNorm2d(channels), nn.ReLU()]
        width = channels

    class Reference(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Linear(2 * channels, 2)

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            maps = self.features(images)
            pooled = torch.cat([maps.amax(dim=(2, 3)), maps.mean(dim=(2, 3))], dim=1)
            return self.classifier(pooled)

    return Reference()


def reference_transformer(num_pixels: int, layers: int, hidden_size: int, position_embedding_type: str,
                          pooling: str, init_from: str | None) -> nn.Module:
    """An SPT classifier over the pixel tokens the `pathfinder` task feeds it (`tasks.common.pixel_ids`: special
    tokens first, then one id per value) that returns logits, from scratch or a checkpoint."""
    from hf_spt import SptConfig, SptForSequenceClassification

    if init_from:
        model = SptForSequenceClassification.from_pretrained(init_from, num_labels=2, pooling=pooling, **WITHOUT_HUB_KERNELS)
    else:
        config = SptConfig(vocab_size=NUM_SPECIAL_TOKENS + PIXEL_VALUES, max_position_embeddings=num_pixels, num_hidden_layers=layers,
                           hidden_size=hidden_size, num_attention_heads=4, intermediate_size=2 * hidden_size,
                           pooling=pooling, position_embedding_type=position_embedding_type, num_labels=2,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        model = SptForSequenceClassification(config)

    class PixelClassifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            ids = (images.flatten(1) * (PIXEL_VALUES - 1)).round().long() + NUM_SPECIAL_TOKENS
            return self.model(input_ids=ids).logits

    return PixelClassifier()


CONTROL_LABELS = ("path", "lit_above_median", "more_lit_top", "more_lit_left")


def control_labels(images: np.ndarray, labels: np.ndarray, kind: str, seed: int = 0) -> np.ndarray:
    """The path label, or a balanced control label computed from the images (module docstring): the half of the
    images with more lit pixels (ties broken at random), or whether the top (left) half holds more lit pixels than
    the bottom (right) half, ties split at random."""
    if kind == "path":
        return labels
    rng = np.random.default_rng(seed)
    lit = images > 0
    if kind == "lit_above_median":
        order = np.lexsort((rng.random(len(images)), lit.reshape(len(images), -1).sum(1)))
        balanced = np.zeros(len(images), np.int64)
        balanced[order[len(images) // 2 :]] = 1
        return balanced
    return half_labels(images, kind, rng)


MODEL_FLAGS = {"cnn": ("channels", "depth"), "transformer": ("depth", "hidden_size", "position_embedding_type",
                                                          "pooling", "init_from")}
CHECKPOINT_FIXES = ("depth", "hidden_size", "position_embedding_type")  # read from --init_from's config instead


def check_model_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A model flag the chosen model does not read is an error, never a silently ignored value."""
    unread = [name for names in MODEL_FLAGS.values() for name in names
              if name not in MODEL_FLAGS[args.model] and getattr(args, name) is not None]
    if args.init_from:
        unread += [name for name in CHECKPOINT_FIXES if getattr(args, name) is not None]
    if unread:
        parser.error(f"--model {args.model}{' --init_from' if args.init_from else ''} does not read "
                     f"{', '.join('--' + name for name in dict.fromkeys(unread))}: drop them.")


def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batch_size: int = 256) -> float:
    model.eval()
    with torch.no_grad():
        predictions = torch.cat([model(images[i : i + batch_size]).argmax(-1) for i in range(0, len(images), batch_size)])
    return float((predictions == labels).float().mean())


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--image_size", type=int, default=32)
    parser.add_argument("--contour_length", type=int, default=14)
    parser.add_argument("--num_distractors", type=int, default=2)
    parser.add_argument("--num_images", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--model", choices=("cnn", "transformer"), default="cnn")
    parser.add_argument("--channels", type=int, help="cnn: channels per block (default 32)")
    parser.add_argument("--depth", type=int, help="cnn: conv blocks; transformer from scratch: layers (default 6)")
    parser.add_argument("--hidden_size", type=int, help="transformer from scratch: width (default 64)")
    parser.add_argument("--position_embedding_type", help="transformer from scratch: sinusoidal (default), alibi, ...")
    parser.add_argument("--pooling", help="transformer: mean (default), max, last, cls or last_mean")
    parser.add_argument("--init_from", help="transformer: an SPT checkpoint folder to start from")
    parser.add_argument("--label", choices=CONTROL_LABELS, default="path", help="the path label or a control label")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--torch_threads", type=int, default=2)
    args = parser.parse_args(argv)
    check_model_flags(parser, args)
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)

    images, labels = generate_pathfinder(args.num_images, args.seed, args.image_size, args.contour_length,
                                         args.num_distractors)
    labels = control_labels(images, labels, args.label, args.seed)
    order = np.random.default_rng(args.seed).permutation(len(images))
    images = torch.tensor(images[order], dtype=torch.float32).unsqueeze(1) / 255.0
    labels = torch.tensor(labels[order])
    train_end, validation_end = int(0.8 * len(images)), int(0.9 * len(images))
    splits = {"train": slice(0, train_end), "validation": slice(train_end, validation_end),
              "test": slice(validation_end, None)}
    train_x, train_y = images[splits["train"]], labels[splits["train"]]

    if args.model == "cnn":
        model = reference_cnn(args.channels or 32, args.depth or 6)
    else:
        model = reference_transformer(args.image_size**2, args.depth or 6, args.hidden_size or 64,
                                      args.position_embedding_type or "sinusoidal", args.pooling or "mean", args.init_from)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    best = {"validation_accuracy": -1.0}
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        model.train()
        permutation = torch.randperm(len(train_x))
        for first in range(0, len(train_x), args.batch_size):
            batch = permutation[first : first + args.batch_size]
            loss = nn.functional.cross_entropy(model(train_x[batch]), train_y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        row = {"epoch": epoch, "train_accuracy": accuracy(model, train_x, train_y),
               "validation_accuracy": accuracy(model, images[splits["validation"]], labels[splits["validation"]]),
               "test_accuracy": accuracy(model, images[splits["test"]], labels[splits["test"]]),
               "seconds": round(time.perf_counter() - start, 1)}
        print(json.dumps(row), flush=True)
        if row["validation_accuracy"] > best["validation_accuracy"]:
            best = row
    summary = {"config": {key: getattr(args, key) for key in ("model", "label", "image_size", "contour_length",
                                                              "num_distractors", "num_images", "seed")},
               "best_epoch": best["epoch"], "validation_accuracy": best["validation_accuracy"],
               "test_accuracy": best["test_accuracy"]}
    print(json.dumps(summary), flush=True)
    return summary


if __name__ == "__main__":
    main()
