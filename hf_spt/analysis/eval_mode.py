"""Running a model for measurement inside training code: eval mode, on the model's device, then back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


@contextlib.contextmanager
def evaluating(module: nn.Module) -> Iterator[torch.device]:
    """`module` in eval mode (no dropout) for the block, yielding the device of its parameters.

    Its training mode is restored on exit, so a probe run between training steps changes nothing.
    """
    was_training = module.training
    module.eval()
    try:
        yield next(module.parameters()).device
    finally:
        module.train(was_training)


__all__ = ["evaluating"]
