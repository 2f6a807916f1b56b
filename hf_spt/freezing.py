"""Freezing parts of an SPT encoder at their current values (e.g. attention at its random init).

Coser et al. (arXiv 2605.21070) fine-tune from scratch with W_Q, W_K, W_V, W_O frozen at their
random values to show that label supervision barely trains attention. Freezing here sets
`requires_grad=False`: the Trainer builds its optimizer from parameters that require grad only,
so frozen ones get no gradient, no AdamW state and no weight decay, and stay bit-identical.
Call `freeze_parts` before the Trainer creates its optimizer. Parts are those of
`partial_loading.PART_PATTERNS` (one definition of which key belongs to which part).
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from .partial_loading import parse_parts, select_keys


def freeze_parts(model: nn.Module, parts: str | Iterable[str], layers: Iterable[int] | None = None) -> list[str]:
    """Set `requires_grad=False` on the parameters of `parts` (e.g. "attention" or "qk,mlp"); return their names.

    Biases go with their weights (`qk` freezes q_proj/k_proj weights and biases). A selection
    that matches no parameter is an error, so a typo in a layer list cannot silently freeze nothing.
    """
    parameters = dict(model.named_parameters())
    names = select_keys(parameters, parse_parts(parts), layers)
    if not names:
        raise ValueError(f"Parts {parts!r} (layers {layers}) match no parameter of this model; "
                         f"its parameters: {sorted(parameters)}.")
    for name in names:
        parameters[name].requires_grad_(False)
    return names


def frozen_parameter_names(model: nn.Module) -> list[str]:
    """Names of the parameters that do not require grad."""
    return [name for name, parameter in model.named_parameters() if not parameter.requires_grad]


__all__ = ["freeze_parts", "frozen_parameter_names"]
