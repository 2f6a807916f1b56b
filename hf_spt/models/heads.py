"""The sequence-classification head shared by the SPT encoder and any-backbone classifiers.

Pooling over real tokens (`config.pooling`): every pooling reads real tokens only
(`attention_mask == 1`), so extra padding never changes the pooled vector. SPT work uses mean,
max or last-token pooling and no CLS token (Amos et al.); `last_mean` is the head of Balestriero
& Huang. Then dropout and a linear classifier; with
`config.two_tower` a second sequence goes through the same encoder and the classifier reads
[u, v, u*v, u-v] of the two pooled vectors (LRA Retrieval). `problem_type` (single-label,
multi-label, regression) behaves as in transformers.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedConfig
from transformers.modeling_outputs import SequenceClassifierOutput

from .configuration_spt import check_pooling
from .packing import packed_inputs, packed_layout, pool_packed


def pooled_size(hidden_size: int, pooling: str) -> int:
    """Width of the pooled vector for a given pooling."""
    return 2 * hidden_size if pooling == "last_mean" else hidden_size


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """Index of the last real token of each row (B,), for left or right padding."""
    length = attention_mask.shape[-1]
    positions = torch.arange(length, device=attention_mask.device)
    return (positions * attention_mask.long()).argmax(dim=-1)


def pool(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, pooling: str) -> torch.Tensor:
    """Pool `hidden_states` (B, T, D) over the real tokens of `attention_mask` (B, T)."""
    check_pooling(pooling)
    if attention_mask is None:
        attention_mask = torch.ones(hidden_states.shape[:2], dtype=torch.long, device=hidden_states.device)
    mask = attention_mask.to(hidden_states.dtype).unsqueeze(-1)  # (B, T, 1)
    if pooling == "cls":
        return hidden_states[:, 0]
    if pooling == "max":
        return hidden_states.masked_fill(mask == 0, torch.finfo(hidden_states.dtype).min).amax(dim=1)
    mean = (hidden_states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    if pooling == "mean":
        return mean
    last = hidden_states[torch.arange(hidden_states.shape[0], device=hidden_states.device), last_token_index(attention_mask)]
    if pooling == "last":
        return last
    return torch.cat((last, mean), dim=-1)  # last_mean


def classification_loss(
    labels: torch.Tensor, logits: torch.Tensor, config: PreTrainedConfig, num_items_in_batch: torch.Tensor | int | None = None
) -> torch.Tensor:
    """transformers' sequence-classification loss (`config.problem_type`, inferred as it does), made
    right under gradient accumulation.

    The per-item losses are summed and divided by `num_items_in_batch`, the Trainer's count of labels
    over all the batches of one optimizer step (examples; label entries for multi-label and
    multi-output regression); without it by this batch's count, which is the plain mean.
    transformers' own `ForSequenceClassificationLoss` uses the count for single-label only.
    """
    if config.problem_type is None:
        if config.num_labels == 1:
            config.problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            config.problem_type = "single_label_classification"
        else:
            config.problem_type = "multi_label_classification"
    labels = labels.to(logits.device)
    if config.problem_type == "regression":
        predictions = logits.float().squeeze(-1) if config.num_labels == 1 else logits.float()
        total = nn.functional.mse_loss(predictions, labels.float().view(predictions.shape), reduction="sum")
    elif config.problem_type == "single_label_classification":
        total = nn.functional.cross_entropy(logits.view(-1, config.num_labels).float(), labels.view(-1), reduction="sum")
    elif config.problem_type == "multi_label_classification":
        total = nn.functional.binary_cross_entropy_with_logits(logits.float(), labels.float(), reduction="sum")
    else:
        raise ValueError(f"Unknown problem_type {config.problem_type!r}.")
    count = labels.ne(-100).sum() if num_items_in_batch is None else num_items_in_batch
    if torch.is_tensor(count):
        count = count.to(total.device)
    return total / count


def classifier_features(hidden_size: int, pooling: str, two_tower: bool) -> int:
    """Width of the classifier's input: the pooled vector, or [u, v, u*v, u-v] of two."""
    return pooled_size(hidden_size, pooling) * (4 if two_tower else 1)


class PooledClassifierMixin:
    """`forward` of a `PreTrainedModel` whose encoder is `self.base_model` and whose head is
    `self.dropout` + `self.classifier`.

    `**kwargs` takes the Trainer's `num_items_in_batch`, which the loss divides by
    (`classification_loss`), so gradient accumulation gives the full batch's step. A packed batch
    (`position_ids` restarting per sequence, no mask, the collator's offsets; `packing`) is pooled per
    sequence: B rows packed give the same B logits as padded.
    """

    classifier: nn.Linear
    dropout: nn.Dropout

    def _encode(self, input_ids, attention_mask, inputs_embeds, output_attentions, output_hidden_states, position_ids,
                packed: dict):
        """The encoder's outputs and one pooled vector per sequence: (B, D) padded, (S, D) for a packed row
        (`packed`: the collator's offsets, `packing.PACKED_KEYS`)."""
        positions = {} if position_ids is None else {"position_ids": position_ids}
        outputs = self.base_model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
            **positions,
            **packed,
        )
        layout = packed_layout(position_ids, attention_mask, packed)
        if layout is not None:
            return outputs, pool_packed(outputs.last_hidden_state, layout, self.config.pooling)
        return outputs, pool(outputs.last_hidden_state, attention_mask, self.config.pooling)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        pair_input_ids: torch.Tensor | None = None,
        pair_attention_mask: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        position_ids: torch.Tensor | None = None,
        pair_position_ids: torch.Tensor | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput | tuple:
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        packed, pair_packed = packed_inputs(kwargs), packed_inputs(kwargs, "pair_")
        outputs, pooled = self._encode(input_ids, attention_mask, inputs_embeds, output_attentions, output_hidden_states,
                                       position_ids, packed)
        if self.config.two_tower:
            if pair_input_ids is None:
                raise ValueError("This model is two-tower (config.two_tower=True): pass pair_input_ids too.")
            _, pair_pooled = self._encode(pair_input_ids, pair_attention_mask, None, False, False, pair_position_ids,
                                          pair_packed)
            pooled = torch.cat((pooled, pair_pooled, pooled * pair_pooled, pooled - pair_pooled), dim=-1)
        logits = self.classifier(self.dropout(pooled))  # (B, num_labels)
        loss = None
        if labels is not None:
            loss = classification_loss(labels, logits, self.config, kwargs.get("num_items_in_batch"))
        output = SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )
        return output if return_dict else output.to_tuple()


__all__ = ["PooledClassifierMixin", "classification_loss", "classifier_features", "pool", "pooled_size", "last_token_index"]
