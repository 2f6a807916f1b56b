"""Configuration of the SPT encoder family (`model_type = "spt"`).

Field names follow transformers' conventions (BERT/Llama) so that tools written for those
models read this config too. Defaults describe the small model of the default experiment; the
task presets in `hf_spt.tasks` set the published LRA sizes.
"""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

POSITION_EMBEDDING_TYPES = ("sinusoidal", "learned", "rotary", "alibi", "none")
POOLING_TYPES = ("mean", "max", "last", "cls", "last_mean")


def check_pooling(pooling: str) -> None:
    """Reject an unknown pooling name, naming the valid ones (SPT config, backbone config, `pool`)."""
    if pooling not in POOLING_TYPES:
        raise ValueError(f"Unknown pooling {pooling!r}; choose one of {', '.join(POOLING_TYPES)}.")


@strict
class SptConfig(PreTrainedConfig):
    r"""
    Configuration for [`SptModel`], [`SptForMaskedLM`] and [`SptForSequenceClassification`].

    Args:
        vocab_size: number of token ids the embedding table holds.
        hidden_size: width of the residual stream (d_model).
        num_hidden_layers: number of pre-LN Transformer layers.
        num_attention_heads: heads per layer; must divide `hidden_size`.
        intermediate_size: width of the MLP (`fc1` output).
        hidden_act: MLP activation (any name in `transformers.activations.ACT2FN`).
        max_position_embeddings: longest sequence the model accepts; longer inputs raise an error.
        position_embedding_type: `sinusoidal` (fixed, additive, the default studied by the SPT
            papers), `learned` (additive table), `rotary` (RoPE on queries and keys), `alibi`
            (linear distance bias on the attention logits) or `none`.
        rope_theta: base of the rotary frequencies (only for `rotary`).
        hidden_dropout_prob: dropout on embeddings and residual branches.
        attention_probs_dropout_prob: dropout on attention probabilities. Keep 0 for speed: with
            dropout, PyTorch's SDPA leaves its flash kernel for the slow math kernel.
        classifier_dropout: dropout before the classification layer (`None`: `hidden_dropout_prob`).
        layer_norm_eps: epsilon of every LayerNorm.
        initializer_range: std of the normal init of linear weights (and learned position tables).
        embedding_init_std: std of the normal init of token embeddings. 1.0 puts tokens on the
            scale of the sinusoids (per-dimension RMS 0.71), as Vaswani et al.'s sqrt(d)-scaled
            embeddings do; with BERT's 0.02 the positions drown the tokens after the first
            LayerNorm and SPT spends many epochs on a loss plateau before attention can use tokens.
        pooling: how [`SptForSequenceClassification`] turns token states into one vector:
            `mean` (over real tokens), `max`, `last` (last real token), `cls` (first token) or
            `last_mean` (last token concatenated with the mean, as in Balestriero & Huang).
        two_tower: classification of text pairs with one shared encoder; the classifier reads
            [u, v, u*v, u-v] of the two pooled vectors (LRA Retrieval).
        sparse_prediction: [`SptForMaskedLM`] with `labels` computes logits only at the labelled
            positions and returns them flat, (num_masked, vocab_size), as ModernBERT's flag does;
            off by default, when logits are (batch, length, vocab_size). `PretrainTrainer` turns
            it on for its training steps.
        mask_token_id / cls_token_id: ids of the tokenizer's `[MASK]` and `[CLS]` tokens.
    """

    model_type = "spt"

    vocab_size: int = 260
    hidden_size: int = 64
    num_hidden_layers: int = 1
    num_attention_heads: int = 4
    intermediate_size: int = 256
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    position_embedding_type: str = "sinusoidal"
    rope_theta: float = 10000.0
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    classifier_dropout: float | None = None
    layer_norm_eps: float = 1e-5
    initializer_range: float = 0.02
    embedding_init_std: float = 1.0
    pooling: str = "mean"
    two_tower: bool = False
    sparse_prediction: bool = False
    pad_token_id: int | None = 0
    mask_token_id: int | None = 1
    cls_token_id: int | None = 2
    tie_word_embeddings: bool = True

    def validate_architecture(self):
        """Reject configurations that cannot build a model, naming the fix."""
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads}): pick a head count that divides it."
            )
        if self.position_embedding_type not in POSITION_EMBEDDING_TYPES:
            raise ValueError(
                f"Unknown position_embedding_type {self.position_embedding_type!r}; "
                f"choose one of {', '.join(POSITION_EMBEDDING_TYPES)}."
            )
        check_pooling(self.pooling)
        head_dim = self.hidden_size // self.num_attention_heads
        if self.position_embedding_type == "rotary" and head_dim % 2:
            raise ValueError(f"rotary positions need an even head size, got {head_dim}.")
        if self.position_embedding_type == "sinusoidal" and self.hidden_size % 2:
            raise ValueError(f"sinusoidal positions need an even hidden_size, got {self.hidden_size}.")


__all__ = ["SptConfig", "POSITION_EMBEDDING_TYPES", "POOLING_TYPES", "check_pooling"]
