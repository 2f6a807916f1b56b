"""The SPT encoder: a pre-LN Transformer for self-pretraining and sequence classification.

Layout follows transformers' BERT/DistilBERT: attention goes through
`ALL_ATTENTION_FUNCTIONS` (SDPA by default, eager for `output_attentions=True`), heads are the
base model plus a small module. Parameter names are a contract used by partial loading:
`layers.{i}.attention.{q,k,v,o}_proj`, `layers.{i}.mlp.{fc1,fc2}`.
"""

from __future__ import annotations

import os

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutput, MaskedLMOutput

from .attention_spt import ALIBI_NEEDS_A_MASK, SptAttention, attention_bias, eager_attention_forward
from .configuration_spt import SptConfig
from .heads import PooledClassifierMixin, classifier_features
from .packing import packed_inputs, packed_layout, runs_varlen_attention
from .positions import alibi_slopes, rotary_cos_sin, rotary_inverse_frequencies, sinusoidal_table
from .varlen_attention import VARLEN_IMPLEMENTATIONS, varlen_kernel_runs


class SptEmbeddings(nn.Module):
    """Token embedding plus an additive position table (sinusoidal fixed, or learned)."""

    def __init__(self, config: SptConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embedding_type = config.position_embedding_type
        if config.position_embedding_type == "learned":
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        elif config.position_embedding_type == "sinusoidal":
            # A buffer, not a parameter: fixed, never trained, rebuilt in `_init_weights`.
            self.register_buffer(
                "sinusoidal_positions",
                sinusoidal_table(config.max_position_embeddings, config.hidden_size),
                persistent=False,
            )
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def position_table(self) -> torch.Tensor | None:
        """The additive position table P (max_positions, D), or None when positions are not additive."""
        if self.position_embedding_type == "learned":
            return self.position_embeddings.weight
        if self.position_embedding_type == "sinusoidal":
            return self.sinusoidal_positions
        return None

    def forward(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        table = self.position_table()
        if table is not None:
            inputs_embeds = inputs_embeds + table[position_ids].to(inputs_embeds.dtype)
        return self.dropout(inputs_embeds)


class SptMLP(nn.Module):
    """Position-wise MLP `fc2(act(fc1(x)))`."""

    def __init__(self, config: SptConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.fc2 = nn.Linear(config.intermediate_size, config.hidden_size)
        self.act = ACT2FN[config.hidden_act]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(hidden_states)))


class SptLayer(GradientCheckpointingLayer):
    """Pre-LN block: x + Attn(LN(x)), then x + MLP(LN(x)) (Xiong et al., 2020)."""

    def __init__(self, config: SptConfig, layer_idx: int):
        super().__init__()
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = SptAttention(config, layer_idx)
        self.mlp_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.mlp = SptMLP(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        output_attentions: bool = False,
        **attention_kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attended, probs = self.attention(self.attention_norm(hidden_states), attention_mask, rotary, output_attentions,
                                         **attention_kwargs)
        hidden_states = hidden_states + self.dropout(attended)
        hidden_states = hidden_states + self.dropout(self.mlp(self.mlp_norm(hidden_states)))
        return hidden_states, probs


class SptPreTrainedModel(PreTrainedModel):
    """Weight init, checkpoint format and attention back-ends shared by the SPT heads."""

    config_class = SptConfig
    config: SptConfig
    base_model_prefix = "spt"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _no_split_modules = ["SptLayer"]
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = False
    _supports_attention_backend = True
    _can_compile_fullgraph = True  # masks are built without data-dependent branches (attention_spt)

    def _init_weights(self, module: nn.Module) -> None:
        """transformers' normal init (std `initializer_range`), token embeddings at `embedding_init_std`,
        and the fixed position tables."""
        super()._init_weights(module)
        if isinstance(module, SptEmbeddings):
            tokens = module.word_embeddings
            if not getattr(tokens.weight, "_is_hf_initialized", False):
                init.normal_(tokens.weight, std=self.config.embedding_init_std)
                if tokens.padding_idx is not None:
                    init.zeros_(tokens.weight[tokens.padding_idx])
            if module.position_embedding_type == "sinusoidal":
                init.copy_(module.sinusoidal_positions, sinusoidal_table(*module.sinusoidal_positions.shape))
        elif isinstance(module, SptModel):
            if module.rotary_inv_freq is not None:
                init.copy_(module.rotary_inv_freq, rotary_inverse_frequencies(module.head_dim, self.config.rope_theta))
            if module.alibi_slopes is not None:
                init.copy_(module.alibi_slopes, alibi_slopes(self.config.num_attention_heads))
        elif isinstance(module, SptLMHead):
            init.zeros_(module.bias)

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs) -> None:
        """transformers' `save_pretrained`; where the classes are registered for remote code (`import
        hf_spt`, or loaded with `trust_remote_code=True`), `auto_map` names every head of this module, not
        only the class saving: the copied `modeling_spt.py` holds them all, so a masked-LM checkpoint
        loads as a classifier, as the bare encoder or in a pipeline without hf_spt too."""
        if self.is_remote_code():
            self.config.auto_map = {**(getattr(self.config, "auto_map", None) or {}), **remote_auto_map()}
        super().save_pretrained(save_directory, *args, **kwargs)


class SptModel(SptPreTrainedModel):
    """The bare encoder: embeddings, `num_hidden_layers` pre-LN layers and a final LayerNorm.

    Takes padded batches (`attention_mask`) or packed ones: one row of sequences end to end, no
    mask, `position_ids` restarting at 0 per sequence and the collator's offsets in `**kwargs`
    (transformers' `DataCollatorWithFlattening` layout; `packing`), which a varlen kernel
    (`torch_varlen`, flash attention) runs without padding.
    """

    def __init__(self, config: SptConfig):
        super().__init__(config)
        self.embeddings = SptEmbeddings(config)
        self.layers = nn.ModuleList(SptLayer(config, i) for i in range(config.num_hidden_layers))
        self.final_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.head_dim = config.hidden_size // config.num_attention_heads
        rotary = config.position_embedding_type == "rotary"
        alibi = config.position_embedding_type == "alibi"
        inv_freq = rotary_inverse_frequencies(self.head_dim, config.rope_theta) if rotary else None
        self.register_buffer("rotary_inv_freq", inv_freq, persistent=False)
        self.register_buffer("alibi_slopes", alibi_slopes(config.num_attention_heads) if alibi else None, persistent=False)
        self.gradient_checkpointing = False
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings.word_embeddings = value

    def _runs_kernel(self, hidden_states: torch.Tensor) -> bool:
        """Whether a packed row runs a varlen kernel (flash attention; `torch_varlen` where its kernel runs, and its
        stand-in), else a block-diagonal mask."""
        if self.config._attn_implementation in VARLEN_IMPLEMENTATIONS:
            return varlen_kernel_runs(hidden_states, self.config, self.training)
        return runs_varlen_attention(self.config)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> BaseModelOutput | tuple:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids or inputs_embeds.")
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        if inputs_embeds is None:
            inputs_embeds = self.embeddings.word_embeddings(input_ids)  # (B, T, D)
        batch, length = inputs_embeds.shape[:2]
        layout = packed_layout(position_ids, attention_mask, kwargs)  # a packed row: sequences end to end
        longest = layout.max_length if layout is not None else length
        if longest > self.config.max_position_embeddings:
            raise ValueError(
                f"Sequence length {longest} exceeds max_position_embeddings={self.config.max_position_embeddings}. "
                "Truncate the inputs (tokenizer truncation=True, max_length=..., or --truncation in run_spt.py) "
                "or build the model with a larger max_position_embeddings."
            )
        if position_ids is None:
            position_ids = torch.arange(length, device=inputs_embeds.device).expand(batch, length)
        hidden_states = self.embeddings(inputs_embeds, position_ids)
        if layout is not None and not output_attentions and self._runs_kernel(hidden_states):  # per sequence only
            if self.alibi_slopes is not None:
                raise ValueError(ALIBI_NEEDS_A_MASK)
            bias, attention_kwargs = None, layout.kernel_kwargs()
        else:
            sequence_ids = None if layout is None else layout.sequence_ids
            bias = attention_bias(self.config, attention_mask, hidden_states, self.alibi_slopes, sequence_ids)
            attention_kwargs = {}
        rotary = None
        if self.rotary_inv_freq is not None:
            rotary = rotary_cos_sin(position_ids, self.rotary_inv_freq, hidden_states.dtype)

        all_hidden_states = [] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        for layer in self.layers:
            if output_hidden_states:
                all_hidden_states.append(hidden_states)
            hidden_states, probs = layer(hidden_states, bias, rotary, bool(output_attentions), **attention_kwargs)
            if output_attentions:
                all_attentions.append(probs)
        hidden_states = self.final_norm(hidden_states)
        if output_hidden_states:
            all_hidden_states.append(hidden_states)
        output = BaseModelOutput(
            last_hidden_state=hidden_states,
            hidden_states=tuple(all_hidden_states) if output_hidden_states else None,
            attentions=tuple(all_attentions) if output_attentions else None,
        )
        return output if return_dict else output.to_tuple()


class SptLMHead(nn.Module):
    """BERT's MLM head: dense + activation + LayerNorm, then a decoder tied to the token embeddings.

    As in BERT, the output bias `bias` is the decoder's own bias (tied by `_tied_weights_keys`),
    so `resize_token_embeddings` resizes it with the decoder.
    """

    def __init__(self, config: SptConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACT2FN[config.hidden_act]
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.norm(self.act(self.dense(hidden_states))))


class SptForMaskedLM(SptPreTrainedModel):
    """Encoder plus MLM head for self-pretraining.

    Logits are (B, T, vocab_size), as for every transformers masked LM. With
    `config.sparse_prediction` and `labels` (ModernBERT's switch), they are computed only at the
    labelled positions (`labels != -100`) and come back flat, (num_masked, vocab_size):
    projecting every token onto the vocabulary costs T/num_masked times more for nothing, so
    `PretrainTrainer` turns it on for its training steps. The loss is the same either way, and
    under gradient accumulation it is divided by the masked tokens of the whole step
    (`num_items_in_batch`), as transformers' `ForMaskedLMLoss` does. Selecting the labelled rows with
    `labels != -100` has a size only the device knows, so it waits for the device every step;
    `masked_positions`, their flat indices into (B * T) computed on the host by the collator
    (`DataCollatorForSpt(return_masked_positions=True)`), selects the same rows in the same order
    without that wait. It is read only with sparse prediction and labels, and must index exactly the
    labelled tokens of `labels`.
    """

    _tied_weights_keys = {
        "lm_head.decoder.weight": "spt.embeddings.word_embeddings.weight",
        "lm_head.decoder.bias": "lm_head.bias",
    }

    def __init__(self, config: SptConfig):
        super().__init__(config)
        self.spt = SptModel(config)
        self.lm_head = SptLMHead(config)
        self.post_init()

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head.decoder

    def set_output_embeddings(self, new_embeddings: nn.Linear) -> None:
        self.lm_head.decoder = new_embeddings
        self.lm_head.bias = new_embeddings.bias

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        masked_positions: torch.Tensor | None = None,
        **kwargs,
    ) -> MaskedLMOutput | tuple:
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        outputs = self.spt(
            input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
            **packed_inputs(kwargs),  # a packed batch's offsets (`packing.PACKED_KEYS`); the rest is the loss's
        )
        hidden_states = outputs.last_hidden_state  # (B, T, D)
        if labels is not None and self.config.sparse_prediction and masked_positions is not None:
            hidden_states = hidden_states.reshape(-1, hidden_states.shape[-1]).index_select(0, masked_positions)
            labels = labels.reshape(-1).index_select(0, masked_positions)  # (N, D), (N,): no device sync
        elif labels is not None and self.config.sparse_prediction:
            masked = labels != -100  # (B, T)
            hidden_states, labels = hidden_states[masked], labels[masked]  # (N, D), (N,)
        logits = self.lm_head(hidden_states)  # (B, T, V), or (N, V) when sparse
        loss = None
        if labels is not None:
            loss = self.loss_function(logits, labels, vocab_size=self.config.vocab_size, **kwargs)
        output = MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )
        return output if return_dict else output.to_tuple()


class SptForSequenceClassification(PooledClassifierMixin, SptPreTrainedModel):
    """Encoder, pooling over real tokens (`config.pooling`), dropout and a linear classifier.

    With `config.two_tower`, a second sequence (`pair_input_ids`, `pair_attention_mask`) goes
    through the same encoder and the classifier reads [u, v, u*v, u-v] of the pooled vectors.
    `problem_type` (single-label, multi-label, regression) behaves as in transformers.
    """

    def __init__(self, config: SptConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.spt = SptModel(config)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(classifier_features(config.hidden_size, config.pooling, config.two_tower), config.num_labels)
        self.post_init()


# The Auto class each head is registered with (`hf_spt.models`), and so mapped in every saved `auto_map`.
AUTO_CLASSES = {"AutoModel": SptModel, "AutoModelForMaskedLM": SptForMaskedLM,
                "AutoModelForSequenceClassification": SptForSequenceClassification}


def remote_auto_map() -> dict[str, str]:
    """`auto_map` entries for every head, named as transformers' `custom_object_save` names the saving one
    (`modeling_spt.SptModel`: the copied file's module name, then the class)."""
    return {auto: f"{cls.__module__.rpartition('.')[2]}.{cls.__name__}" for auto, cls in AUTO_CLASSES.items()}


__all__ = [
    "AUTO_CLASSES",
    "remote_auto_map",
    "SptPreTrainedModel",
    "SptModel",
    "SptForMaskedLM",
    "SptForSequenceClassification",
    "eager_attention_forward",
]
