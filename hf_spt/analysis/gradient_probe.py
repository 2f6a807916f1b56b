"""Gradient of a loss with respect to the attention scores (pre-softmax logits).

Coser et al. (arXiv 2605.21070): at uniform attention, the gradient of a supervised loss averaged
over the data, taken w.r.t. the attention scores, vanishes along the directions orthogonal to
each row's all-ones vector, which are the directions a proximity pattern needs; the
masked-reconstruction (MLM) loss keeps a gradient there.

The scores are captured without touching the model: a probe attention function is registered
with transformers' `AttentionInterface` and selected with `model.set_attn_implementation`.
It is eager attention with a zero tensor added to the scores; that tensor is a leaf, so after
`backward()` its `.grad` is exactly d loss / d scores, whatever the layers above do.

A score gradient G (B, H, T, T) is reported as
- `averaged`: the batch-sum of d(mean loss)/d scores, i.e. the data average of each example's
  own score gradient (the quantity of the theory; sequences must share positions, as in the
  fixed-length tasks, for the average to mean anything);
- each split per row into its component along the all-ones vector of the row's real keys and
  the orthogonal rest. Softmax ignores row constants, so the all-ones part is ~0 always;
  `coherence` = |orthogonal part of the average| / mean over examples of |orthogonal part| is
  scale-free: 0 when the examples' gradients cancel, 1 when they all agree.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn
from transformers import AttentionInterface, PreTrainedModel
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

from ..models.modeling_spt import eager_attention_forward

PROBE_ATTENTION = "spt_score_probe"
_score_leaves: contextvars.ContextVar[list[torch.Tensor] | None] = contextvars.ContextVar("spt_score_leaves", default=None)
"""The leaves of the `capture_scores` block being run (the model's forward does not pass them down)."""


def score_probe_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's eager attention with a zero leaf added to the scores (B, H, T, T) for `capture_scores`.

    The leaf enters through the additive mask, which eager attention adds to the scores, so its
    `.grad` is d loss / d scores.
    """
    leaves = _score_leaves.get()
    if leaves is not None:
        leaf = torch.zeros(*query.shape[:-1], key.shape[-2], dtype=query.dtype, device=query.device, requires_grad=True)
        leaves.append(leaf)
        attention_mask = leaf if attention_mask is None else attention_mask + leaf
    return eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout, **kwargs)


AttentionInterface.register(PROBE_ATTENTION, score_probe_attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(PROBE_ATTENTION, eager_mask)  # the probe reads eager's additive mask


@contextlib.contextmanager
def capture_scores(model: PreTrainedModel) -> Iterator[list[torch.Tensor]]:
    """Within the block, `model` attends with the probe; yields the list of score leaves.

    One leaf per attention call, in call order (layer 0 first). The probe is selected with
    `model.set_attn_implementation`, and the model's own implementation is set back on exit.
    """
    previous = model.config._attn_implementation
    leaves: list[torch.Tensor] = []
    token = _score_leaves.set(leaves)
    try:
        model.set_attn_implementation(PROBE_ATTENTION)
        yield leaves
    finally:
        model.set_attn_implementation(previous)
        _score_leaves.reset(token)


def row_split(gradient: torch.Tensor, key_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Split score gradients (..., T, T) per row into the all-ones part and the orthogonal rest.

    `key_mask` (..., T) or None marks real keys; the all-ones vector of a row is 1 on its real
    keys. Returns (along_ones, orthogonal), both shaped like `gradient`, zero on padded keys.
    """
    mask = torch.ones(gradient.shape[:-2] + gradient.shape[-1:], dtype=gradient.dtype) if key_mask is None else key_mask
    mask = mask.to(gradient.dtype)[..., None, :]  # (..., 1, T)
    gradient = gradient * mask
    row_mean = gradient.sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)
    along = row_mean * mask
    return along, gradient - along


@dataclass
class ScoreGradientReport:
    """Norms of one loss's score gradients for one layer (see the module docstring)."""

    averaged_along_ones: float
    averaged_orthogonal: float
    per_example_orthogonal: float
    coherence: float
    averaged_orthogonal_by_offset: list[float]

    def as_dict(self) -> dict[str, float | list[float]]:
        return dict(self.__dict__)


def report_score_gradient(gradient: torch.Tensor, attention_mask: torch.Tensor | None) -> ScoreGradientReport:
    """Summarise d(mean loss)/d scores (B, H, T, T) of one layer."""
    gradient = gradient.detach().double()
    batch = gradient.shape[0]
    key_mask = None if attention_mask is None else attention_mask[:, None, :].expand(-1, gradient.shape[1], -1)
    _, per_example_orthogonal = row_split(gradient * batch, key_mask)  # each example's own gradient
    averaged = gradient.sum(0)  # (H, T, T)
    real = None if attention_mask is None else attention_mask.bool().any(0)[None].expand(gradient.shape[1], -1)
    along, orthogonal = row_split(averaged, real)
    per_example = float(per_example_orthogonal.flatten(1).norm(dim=1).mean())
    length = gradient.shape[-1]
    by_offset = [float(orthogonal.diagonal(offset=d, dim1=-2, dim2=-1).mean()) for d in range(-(length - 1), length)]
    return ScoreGradientReport(
        averaged_along_ones=float(along.norm()),
        averaged_orthogonal=float(orthogonal.norm()),
        per_example_orthogonal=per_example,
        coherence=float(orthogonal.norm()) / per_example if per_example > 0 else float("nan"),
        averaged_orthogonal_by_offset=by_offset,
    )


def score_gradients(
    model: nn.Module, batch: dict[str, torch.Tensor], loss_of: Callable[[object], torch.Tensor] | None = None
) -> list[torch.Tensor]:
    """d loss / d scores (B, H, T, T) of every attention call of `model` on `batch`.

    `loss_of(outputs)` gives the scalar loss (default: `outputs.loss`). The model must dispatch
    attention through `ALL_ATTENTION_FUNCTIONS` (the AttentionInterface), as the SPT models do.
    """
    with capture_scores(model) as leaves:
        outputs = model(**batch)
        loss = outputs.loss if loss_of is None else loss_of(outputs)
        loss.backward()
        gradients = [leaf.grad.detach().clone() for leaf in leaves]
    model.zero_grad(set_to_none=True)
    return gradients


def make_attention_uniform(model: PreTrainedModel) -> None:
    """Set W_Q = W_K = 0 and their biases to 0 in every layer: every score is 0, attention is uniform."""
    with torch.no_grad():
        for layer in model.base_model.layers:
            for projection in (layer.attention.q_proj, layer.attention.k_proj):
                projection.weight.zero_()
                if projection.bias is not None:
                    projection.bias.zero_()


def probe_losses(
    mlm_model: PreTrainedModel,
    classifier: PreTrainedModel,
    mlm_batch: dict[str, torch.Tensor],
    labelled_batch: dict[str, torch.Tensor],
) -> dict[str, list[dict[str, float | list[float]]]]:
    """Per-layer reports of the MLM and supervised score gradients ({"mlm": [...], "supervised": [...]})."""
    reports = {}
    for name, model, batch in (("mlm", mlm_model, mlm_batch), ("supervised", classifier, labelled_batch)):
        gradients = score_gradients(model, batch)
        reports[name] = [report_score_gradient(g, batch.get("attention_mask")).as_dict() for g in gradients]
    return reports


def gradient_probe(
    config,
    mlm_batch: dict[str, torch.Tensor],
    labelled_batch: dict[str, torch.Tensor],
    seed: int = 0,
) -> dict[str, dict[str, list[dict[str, float | list[float]]]]]:
    """The probe at a fresh random init of `config` and at exactly uniform attention.

    The classifier's encoder is a copy of the MLM model's, so both losses see the same weights.
    Runs in float64 so that "vanishes" is not hidden by float32 rounding.
    """
    from ..models.modeling_spt import SptForMaskedLM, SptForSequenceClassification

    torch.manual_seed(seed)
    mlm_model = SptForMaskedLM(config).double()
    classifier = SptForSequenceClassification(config).double()
    classifier.spt.load_state_dict(mlm_model.spt.state_dict())
    results = {"random_init": probe_losses(mlm_model, classifier, mlm_batch, labelled_batch)}
    make_attention_uniform(mlm_model)
    make_attention_uniform(classifier)
    results["uniform_attention"] = probe_losses(mlm_model, classifier, mlm_batch, labelled_batch)
    return results


__all__ = [
    "PROBE_ATTENTION",
    "score_probe_attention",
    "capture_scores",
    "row_split",
    "ScoreGradientReport",
    "report_score_gradient",
    "score_gradients",
    "make_attention_uniform",
    "probe_losses",
    "gradient_probe",
]
