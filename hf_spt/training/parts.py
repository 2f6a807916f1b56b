"""Parts of an SPT encoder (W_Q/W_K, attention, MLP...): save and load them with safetensors, or freeze them.

The "hybrid init" ablations of Coser et al. (arXiv 2605.21070) copy only some weights of an SPT checkpoint into a
freshly initialised model. This module does that reading only the selected tensors: it opens
checkpoints with `safetensors.safe_open` and asks for each selected key, so a 500 MB checkpoint
costs only the bytes of W_Q and W_K. Matched functions in the style of peft's `save_and_load.py`:
`get_partial_state_dict` / `save_partial_state_dict` write a subset, `load_partial_weights`
reads one into a model and returns a `LoadReport` instead of hiding what did not match.

Keys are matched on their encoder-relative name (`layers.0.attention.q_proj.weight`): whatever
comes before it (`spt.` in the MLM and classification heads, nothing in a bare `SptModel`) is a
prefix, so parts move between the three classes. Heads (`lm_head`, `classifier`) are never parts.

Freezing keeps parts at their current values (e.g. attention at its random init): Coser et al. (arXiv 2605.21070) fine-tune from scratch with W_Q, W_K, W_V, W_O frozen at their
random values to show that label supervision barely trains attention. Freezing here sets
`requires_grad=False`: the Trainer builds its optimizer from parameters that require grad only,
so frozen ones get no gradient, no AdamW state and no weight decay, and stay bit-identical.
Call `freeze_parts` before the Trainer creates its optimizer. Parts are those of
`PART_PATTERNS` (one definition of which key belongs to which part).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from ..errors import UserInputError
from .checkpoints import checkpoint_weight_map

PARTIAL_WEIGHTS_NAME = "partial_model.safetensors"
PARTS_METADATA_KEY = "hf_spt_parts"

_LAYER = r"layers\.(?P<layer>\d+)\."
_BIAS_OR_WEIGHT = r"\.(?:weight|bias)"
PART_PATTERNS: dict[str, str] = {
    "qk": _LAYER + r"attention\.[qk]_proj" + _BIAS_OR_WEIGHT,
    "qkv": _LAYER + r"attention\.[qkv]_proj" + _BIAS_OR_WEIGHT,
    "attention": _LAYER + r"attention\.[qkvo]_proj" + _BIAS_OR_WEIGHT,
    "mlp": _LAYER + r"mlp\.fc[12]" + _BIAS_OR_WEIGHT,
    "embeddings": r"embeddings\.(?:word_embeddings|position_embeddings)\.weight",
    "norms": r"(?:" + _LAYER + r"(?:attention_norm|mlp_norm)|final_norm)" + _BIAS_OR_WEIGHT,
    "all": r"(?:embeddings\.|" + _LAYER + r"|final_norm\.).+",
}
"""Part name -> regular expression over encoder-relative key names (one source of truth for
partial loading and for freezing)."""

# An encoder key is a (possibly empty) dotted prefix, then `embeddings.`, `layers.N.` or `final_norm.`.
_ENCODER_KEY = re.compile(r"^(?P<prefix>(?:[^.]+\.)*?)(?P<key>(?:embeddings|layers\.\d+|final_norm)\..+)$")


class Parts(str):
    """A checked selection of parts: `Parts("qk, mlp")` is the text `"qk,mlp"` (what runs record and compare) with
    `names == ("qk", "mlp")`. The one place part names are parsed: a selection is parsed where it enters (a flag,
    a grid arm) and everything after reads `names`; `Parts(parts)` of a `Parts` is that same value, not parsed
    again. An empty selection or an unknown name is an error listing the valid ones."""

    names: tuple[str, ...]

    def __new__(cls, parts: str | Iterable[str]) -> Parts:
        if isinstance(parts, Parts):
            return parts
        if not isinstance(parts, str) and not all(isinstance(part, str) for part in parts):
            raise UserInputError(f"Parts {parts!r}: give part names as text, e.g. 'qk' or 'qk,mlp'.")
        names = [p.strip() for p in (parts.split(",") if isinstance(parts, str) else parts) if p.strip()]
        if not names:
            raise UserInputError(f"No part given; choose one or more (comma-separated) of {', '.join(PART_PATTERNS)}.")
        unknown = [name for name in names if name not in PART_PATTERNS]
        if unknown:
            raise UserInputError(f"Unknown part(s) {unknown}; valid parts: {', '.join(PART_PATTERNS)} (combine with "
                                 "commas).")
        selection = super().__new__(cls, ",".join(names))
        selection.names = tuple(names)
        return selection


def split_prefix(name: str) -> tuple[str, str] | None:
    """`"spt.layers.0.mlp.fc1.weight"` -> `("spt.", "layers.0.mlp.fc1.weight")`; None for non-encoder keys."""
    match = _ENCODER_KEY.match(name)
    return (match["prefix"], match["key"]) if match else None


def _layer_of(key: str) -> int | None:
    match = re.match(_LAYER, key)
    return int(match["layer"]) if match else None


def select_keys(names: Iterable[str], parts: str | Iterable[str], layers: Iterable[int] | None = None) -> list[str]:
    """The names (model or checkpoint keys, any prefix) that belong to `parts`, in their given order.

    `layers` limits per-layer keys to those layers; keys outside any layer (embeddings, the
    final norm) stay selected when their part asks for them.
    """
    patterns = [re.compile(PART_PATTERNS[p] + "$") for p in Parts(parts).names]
    wanted_layers = None if layers is None else set(layers)
    selected = []
    for name in names:
        split = split_prefix(name)
        if split is None or not any(p.match(split[1]) for p in patterns):
            continue
        layer = _layer_of(split[1])
        if wanted_layers is not None and layer is not None and layer not in wanted_layers:
            continue
        selected.append(name)
    return selected


def get_partial_state_dict(
    model: nn.Module, parts: str | Iterable[str], layers: Iterable[int] | None = None
) -> dict[str, torch.Tensor]:
    """The selected tensors of `model`, under the model's own key names."""
    state = model.state_dict()
    return {name: state[name].detach() for name in select_keys(state, parts, layers)}


def save_partial_state_dict(
    model: nn.Module, save_directory: str | Path, parts: str | Iterable[str], layers: Iterable[int] | None = None
) -> Path:
    """Write the selected tensors to `save_directory/partial_model.safetensors` (parts in its metadata)."""
    tensors = {name: t.contiguous().clone() for name, t in get_partial_state_dict(model, parts, layers).items()}
    if not tensors:
        raise UserInputError(f"Parts {parts!r} select no tensor of this model; its keys: {sorted(model.state_dict())}.")
    path = Path(save_directory) / PARTIAL_WEIGHTS_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata={"format": "pt", PARTS_METADATA_KEY: str(Parts(parts))})
    return path


@dataclass
class LoadReport:
    """What `load_partial_weights` did, by model key (`loaded`, `missing`) or checkpoint key (`skipped`).

    loaded: model keys set from the checkpoint. skipped: checkpoint keys not selected (never read).
    missing: selected model keys the checkpoint lacks; mismatched: (model key, model shape,
    checkpoint shape). Either one non-empty is an error, so a returned report has neither: no
    selected weight is ever left silently at its random init.
    """

    loaded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    mismatched: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = field(default_factory=list)

    def summary(self) -> str:
        return (f"loaded {len(self.loaded)}, skipped {len(self.skipped)}, missing {len(self.missing)}, "
                f"mismatched {len(self.mismatched)}")

    def loaded_by_part(self, parts: str | Iterable[str]) -> dict[str, dict[str, list[str]]]:
        """The loaded keys per part and layer (`{"qk": {"0": [...], "1": [...]}}`; "-" for keys outside layers),
        as `phase.json` and the model card record them."""
        grouped: dict[str, dict[str, list[str]]] = {}
        for part in Parts(parts).names:
            for key in select_keys(self.loaded, part):
                layer = _layer_of(split_prefix(key)[1])
                grouped.setdefault(part, {}).setdefault("-" if layer is None else str(layer), []).append(key)
        return grouped


def _source_key(target: str, checkpoint_prefix: str, layer_map: Mapping[int, int] | None) -> str | None:
    """Checkpoint key feeding model key `target` (layer renumbered by `layer_map`); None if unmapped."""
    _, key = split_prefix(target)
    layer = _layer_of(key)
    if layer is not None and layer_map is not None:
        if layer not in layer_map:
            return None
        key = re.sub(_LAYER, f"layers.{layer_map[layer]}.", key, count=1)
    return checkpoint_prefix + key


def _missing_advice(
    state: Mapping[str, torch.Tensor], weight_map: Mapping[str, str], prefix: str, absent: list[str]
) -> str:
    """The fix for checkpoint keys `absent` from it: when they are of layers it does not have, its depth as the
    flag to type (or, from Python, a layer map or the layers to load); else other parts."""
    held = {_layer_of(key[len(prefix):]) for key in weight_map if key.startswith(prefix)} - {None}
    lacking = {_layer_of(key[len(prefix):]) for key in absent}
    if not held or None in lacking or lacking & held:
        return "Choose parts the checkpoint has."
    depth = max(held) + 1
    model_depth = max(_layer_of(split[1]) or 0 for split in map(split_prefix, state) if split is not None) + 1
    example = {layer: min(layer, depth - 1) for layer in range(model_depth)}
    return (f"The checkpoint has {depth} layer(s) and the model {model_depth}: give the model the checkpoint's depth "
            f"(run_spt.py: --num_hidden_layers {depth}; a grid arm: num_layers: {depth}), or, from Python, say which "
            f"checkpoint layer feeds each model layer (load_partial_weights(..., layer_map={example})) or load only "
            f"layers {sorted(held)} (layers={sorted(held)}).")


def _checkpoint_prefix(keys: Iterable[str]) -> str:
    prefixes = {split[0] for split in map(split_prefix, keys) if split is not None}
    if len(prefixes) != 1:
        raise UserInputError(f"Checkpoint has {'no' if not prefixes else 'several'} encoder key prefix(es) {sorted(prefixes)}; "
                         "expected keys like '[prefix.]layers.0.attention.q_proj.weight'.")
    return prefixes.pop()


def load_partial_weights(
    model: nn.Module,
    checkpoint: str | Path,
    parts: str | Iterable[str],
    layers: Iterable[int] | None = None,
    layer_map: Mapping[int, int] | None = None,
) -> LoadReport:
    """Copy the `parts` of `checkpoint` into `model`, reading only those tensors.

    `layers` limits the model layers that receive weights; `layer_map` {model layer: checkpoint
    layer} renumbers them between models of different depth (model layers it leaves out are not
    loaded; one checkpoint layer may feed several). Raises when a selected tensor's shape differs
    (listing every mismatch), when a selected tensor is missing from the checkpoint (listing them:
    a 1-layer checkpoint cannot fill a 2-layer model's layer 1 unless `layer_map` says where it
    comes from), or when nothing selected exists in the checkpoint.
    """
    weight_map, shard_path = checkpoint_weight_map(checkpoint)
    prefix = _checkpoint_prefix(weight_map)
    state = model.state_dict(keep_vars=True)
    targets = select_keys(state, parts, layers)
    if not targets:
        raise UserInputError(f"Parts {parts!r} (layers {layers}) select no key of the model; model keys: {sorted(state)}.")
    sources = {t: _source_key(t, prefix, layer_map) for t in targets}
    report = LoadReport()
    report.missing = [t for t, s in sources.items() if s is not None and s not in weight_map]
    wanted = {t: s for t, s in sources.items() if s is not None and s in weight_map}
    if report.missing and wanted:
        lines = "\n".join(f"  {key} (would read {sources[key]})" for key in report.missing)
        raise UserInputError(
            f"{checkpoint} lacks {len(report.missing)} tensor(s) of parts {parts!r}, which would stay at their random "
            f"init:\n{lines}\n{_missing_advice(state, weight_map, prefix, [sources[key] for key in report.missing])}"
        )
    if not wanted:
        raise UserInputError(f"Parts {parts!r} match no tensor of {checkpoint}: the model wants {sorted(filter(None, sources.values()))}; "
                         f"the checkpoint holds {sorted(weight_map)}.")
    by_shard: dict[str, list[str]] = {}
    for target, source in wanted.items():
        by_shard.setdefault(weight_map[source], []).append(target)
    tensors: dict[str, torch.Tensor] = {}
    for shard, shard_targets in by_shard.items():
        with safe_open(str(shard_path(shard)), framework="pt", device="cpu") as handle:
            for target in shard_targets:
                shape = tuple(handle.get_slice(wanted[target]).get_shape())
                if shape != tuple(state[target].shape):
                    report.mismatched.append((target, tuple(state[target].shape), shape))
                else:
                    tensors[target] = handle.get_tensor(wanted[target])
    if report.mismatched:
        lines = "\n".join(f"  {k}: model {m}, checkpoint {c}" for k, m, c in report.mismatched)
        raise UserInputError(f"Shape mismatch between the model and {checkpoint}: give the model the checkpoint's "
                             f"sizes and vocabulary (run_spt.py: --hidden_size, --intermediate_size, a task with its "
                             f"vocabulary):\n{lines}")
    with torch.no_grad():
        for target, tensor in tensors.items():
            state[target].copy_(tensor)
    report.loaded = list(tensors)
    read = set(wanted.values())
    report.skipped = [key for key in weight_map if key not in read]
    return report


def freeze_parts(model: nn.Module, parts: str | Iterable[str], layers: Iterable[int] | None = None) -> list[str]:
    """Set `requires_grad=False` on the parameters of `parts` (e.g. "attention" or "qk,mlp"); return their names.

    Biases go with their weights (`qk` freezes q_proj/k_proj weights and biases). A selection
    that matches no parameter is an error, so a typo in a layer list cannot silently freeze nothing.
    """
    parameters = dict(model.named_parameters())
    names = select_keys(parameters, parts, layers)
    if not names:
        raise UserInputError(f"Parts {parts!r} (layers {layers}) match no parameter of this model; "
                         f"its parameters: {sorted(parameters)}.")
    for name in names:
        parameters[name].requires_grad_(False)
    return names


__all__ = ["PARTIAL_WEIGHTS_NAME", "PART_PATTERNS", "Parts", "LoadReport", "split_prefix", "select_keys",
           "get_partial_state_dict", "save_partial_state_dict", "load_partial_weights", "freeze_parts"]
