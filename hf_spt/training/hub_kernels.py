"""Hub kernels (transformers' `kernels` integration) only where a run asks for them.

transformers 5.25 made `from_pretrained` default to `use_kernels=True`. A loaded model then
re-selects layers (GELU, which every SPT model uses, and others) at each `train()`/`eval()` switch
for the device it sits on, with code downloaded from the Hub: offline, the first evaluation on a
GPU stops (`kernels-community/activation` is not in the local cache); online, the loaded arms
(SPT fine-tuning, hybrid init) compute with code no run recorded, while the arms built from a
config (scratch, SPT pretraining) do not. Either way a comparison's arms would differ in more than
their weights.

So every hf_spt loader passes `WITHOUT_HUB_KERNELS` to `from_pretrained`, and kernels come from one
place, `set_hub_kernels`, for every arm of a run that asks (`--use_hub_kernels`, recorded in each
phase's definition like any setting that changes the numbers).
"""

from __future__ import annotations

from typing import TypeVar

from transformers import PreTrainedModel
from transformers.utils import is_kernels_available

from ..errors import UserInputError

WITHOUT_HUB_KERNELS = {"use_kernels": False}
"""`from_pretrained` keyword arguments that keep the model's own layers (transformers >= 5.25 would kernelize)."""

Model = TypeVar("Model", bound=PreTrainedModel)


def check_hub_kernels_available() -> None:
    """Refuse `--use_hub_kernels` where transformers' `kernels` integration is not installed (before any data)."""
    if not is_kernels_available():
        raise UserInputError("--use_hub_kernels needs the `kernels` package in a version transformers supports "
                             "(pip install kernels), or drop the flag to train with the model's own layers.")


def set_hub_kernels(model: Model, enabled: bool) -> Model:
    """`model`, with transformers' Hub kernels turned on when `enabled` (they are then chosen for the device the
    model sits on at each `train()`/`eval()`), else as it is: loaded with `WITHOUT_HUB_KERNELS` or built from a
    config, it uses its own layers."""
    if enabled:
        check_hub_kernels_available()
        model.set_use_kernels(True)
    return model


__all__ = ["WITHOUT_HUB_KERNELS", "check_hub_kernels_available", "set_hub_kernels"]
