"""LoRA fine-tuning through `peft`: low-rank adapters on the attention projections, the head in full.

Balestriero & Huang compare a randomly initialised model trained from scratch with the same
architecture's pretrained checkpoint fine-tuned with LoRA. `apply_lora` wraps a classifier
(`SptForSequenceClassification` or `BackboneForSequenceClassification`) in peft's
`PeftModelForSequenceClassification`: adapters on `target_modules` (peft's per-architecture
default; `q_proj`/`v_proj` for the SPT encoder, registered below), the classifier head trained in full
(`modules_to_save`, as peft's own sequence-classification examples do), every other weight frozen.
`peft` is an optional extra (`pip install -e ".[peft]"`); without it these functions say so.
Importing this module (as `import hf_spt` does) registers SPT's default targets in peft's
per-architecture tables, so plain `peft.LoraConfig(task_type="SEQ_CLS")` without `target_modules`
works on an SPT model as it does on BERT.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn
from transformers import PreTrainedModel

from ..errors import UserInputError

SPT_ATTENTION_MODULES = frozenset({"q_proj", "k_proj", "v_proj", "o_proj"})  # W_Q, W_K, W_V, W_O, named as Llama's
HEAD_MODULES = ("classifier",)  # the pooled classifier of both hf_spt heads


def require_peft() -> Any:
    """The `peft` module, or a message naming the extra that installs it."""
    try:
        import peft
    except ImportError:
        raise UserInputError(
            "LoRA fine-tuning needs the `peft` package: pip install -e \".[peft]\" (or pip install peft)."
        ) from None
    return peft


def register_peft_defaults() -> None:
    """Give `model_type="spt"` peft's default targets wherever Llama's default is attention projections only
    (LoRA and its relatives: `q_proj`/`v_proj`; BEFT: `v_proj`), since SPT names them as Llama does.
    Tables whose Llama default names MLP modules (IA3's `down_proj`) stay without SPT: its MLP differs.
    Nothing happens without peft; an entry already there (a user's own) is kept."""
    try:
        from peft.utils import constants
    except ImportError:
        return
    for name, table in vars(constants).items():
        llama = table.get("llama") if name.endswith("_TARGET_MODULES_MAPPING") else None
        if llama and set(llama) <= SPT_ATTENTION_MODULES:
            table.setdefault("spt", list(llama))


def backbone_type(model: PreTrainedModel) -> str:
    """The architecture the adapters go into: the backbone's `model_type` for an any-backbone classifier."""
    config = model.config
    return getattr(getattr(config, "backbone", None), "model_type", None) or config.model_type


def default_target_modules(model: PreTrainedModel) -> list[str]:
    """peft's per-architecture default LoRA targets (`q_proj`/`v_proj` for the SPT encoder, registered above)."""
    peft = require_peft()
    kind = backbone_type(model)
    mapping = peft.utils.constants.TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
    if kind not in mapping:
        raise UserInputError(
            f"peft has no default LoRA target modules for {kind!r}: name them with --lora_target_modules "
            "(e.g. the attention projections' module names)."
        )
    return list(mapping[kind])


def apply_lora(
    model: PreTrainedModel,
    r: int = 8,
    lora_alpha: int = 8,
    lora_dropout: float = 0.0,
    target_modules: Sequence[str] | None = None,
) -> nn.Module:
    """`model` wrapped with LoRA adapters; only the adapters and the classifier head require grad."""
    peft = require_peft()
    targets = list(target_modules) if target_modules else default_target_modules(model)
    config = peft.LoraConfig(
        task_type=peft.TaskType.SEQ_CLS, r=r, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
        target_modules=targets, modules_to_save=list(HEAD_MODULES),
    )
    try:
        return peft.get_peft_model(model, config)
    except ValueError as error:  # peft names the target modules it could not find
        raise UserInputError(f"LoRA target modules {targets} do not fit {backbone_type(model)}: {error}") from None


def parameter_counts(model: nn.Module) -> dict[str, int]:
    """Trainable and total parameter counts (what `results.json` reports for each arm).

    The total counts the weights the model computes with: peft keeps a frozen, unused copy of each
    `modules_to_save` module (`original_module`), which it leaves out, so that a LoRA arm's total is
    its full-fine-tuning twin's plus the adapters.
    """
    used = [parameter for name, parameter in model.named_parameters() if ".original_module." not in name]
    total = sum(parameter.numel() for parameter in used)
    trainable = sum(parameter.numel() for parameter in used if parameter.requires_grad)
    return {"trainable_parameters": trainable, "total_parameters": total}


register_peft_defaults()

__all__ = ["SPT_ATTENTION_MODULES", "register_peft_defaults", "require_peft", "backbone_type", "default_target_modules",
           "apply_lora", "parameter_counts"]
