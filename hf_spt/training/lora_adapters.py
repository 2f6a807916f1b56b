"""LoRA fine-tuning arms: adapters through `peft` on a classifier, and a loadable base folder next to them.

`--finetune_method lora` fine-tunes every arm of a run with LoRA adapters (`lora.apply_lora`:
the run's LoRA settings, `run_spec.PhaseSpec.lora`, the classifier head trained in full, every other weight frozen).
The arm's folder then holds what `peft` saves (`adapter_model.safetensors`, `adapter_config.json`:
adapters plus the trained head) and a `base/` folder: the classifier the adapters were trained on,
as it was before training (starting weights and a fresh head). `base/` is needed because no other
folder holds those exact weights: hf_spt's pooled head on a pretrained backbone, an SPT
checkpoint or a random init is not what `--model_name_or_path` alone would load.
`adapter_config.json` names it by its path relative to the run folder (never an absolute path,
which a Hub push would publish), so from the run folder

    AutoPeftModelForSequenceClassification.from_pretrained("pretrained_lora")

rebuilds the fine-tuned classifier. SPT never uses LoRA: the pretraining phase trains the full
model, and LoRA applies to fine-tuning its weights.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any

from accelerate import PartialState
from torch import nn
from transformers import PreTrainedModel

from .lora import apply_lora

BASE_FOLDER = "base"


def target_modules(names: str | None) -> list[str] | None:
    """`--lora_target_modules` as a list; None: peft's default for the architecture."""
    if not names:
        return None
    return [name.strip() for name in names.split(",") if name.strip()]


def with_adapters(model: PreTrainedModel, lora: dict[str, Any], folder: Path) -> nn.Module:
    """`model` wrapped with LoRA adapters (`lora`: r, alpha, dropout and target_modules, as `run_spec.resolve_run`
    resolves them); its starting weights saved as `folder/base`, which the adapter config names relative to the
    run folder (`folder`'s parent)."""
    base = folder / BASE_FOLDER
    if PartialState().is_main_process:
        model.save_pretrained(base)
    PartialState().wait_for_everyone()
    wrapped = apply_lora(model, r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                         target_modules=target_modules(lora["target_modules"]))
    wrapped.peft_config["default"].base_model_name_or_path = base_reference(folder)
    # On every save (each checkpoint too) peft asks whether the vocabulary changed, reading the config of the base
    # the adapter names from the working directory, else the Hub: names relative to the run folder are neither, so
    # it warned "Could not find a config file in spt/base" (online, it would ask the Hub for a repo `spt/base`).
    # The answer is known: base/ is this very model, whose embeddings LoRA neither trains nor resizes.
    wrapped.save_pretrained = partial(type(wrapped).save_pretrained, wrapped, save_embedding_layers=False)
    return wrapped


def base_reference(folder: Path) -> str:
    """The arm's base folder as the adapter config and the card name it: relative to the run folder."""
    return Path(os.path.relpath(folder / BASE_FOLDER, folder.parent)).as_posix()


def adapter_provenance(model: nn.Module, folder: Path) -> dict[str, Any]:
    """What the card says about an adapter: peft's settings and the base weights it applies to."""
    config = model.peft_config["default"]
    return {"method": "lora", "r": config.r, "lora_alpha": config.lora_alpha, "lora_dropout": config.lora_dropout,
            "target_modules": sorted(config.target_modules),
            "modules_to_save": sorted(set(config.modules_to_save or [])),
            "base_weights": base_reference(folder)}


__all__ = ["BASE_FOLDER", "target_modules", "with_adapters", "base_reference", "adapter_provenance"]
