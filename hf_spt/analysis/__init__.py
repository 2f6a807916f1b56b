"""Mechanism analysis of self-pretraining (Coser et al., arXiv 2605.21070; Balestriero & Huang), one probe per module.

- `attention_maps`: mean attention maps over a data set, per layer and head.
- `proximity`: attention mass near the diagonal, against uniform attention.
- `positional_kernel`: P W_Q W_K^T P^T per head and its share explained by relative distance.
- `gradient_probe`: attention-score gradients of the supervised and MLM losses.
- `token_frequency`: MLM loss per token-frequency bucket; `decay_sweep`: the same for tiny MLMs per weight decay.
- `callback`: proximity scores logged during training.
"""

from .attention_maps import AttentionSummary, plot_attention_maps, plot_proximity_profiles, summarize_attention
from .callback import ProximityCallback
from .decay_sweep import weight_decay_sweep
from .gradient_probe import gradient_probe, report_score_gradient, row_split, score_gradients
from .positional_kernel import diagonal_means, plot_kernels, positional_kernel, relative_share
from .proximity import ProximityStats, proximity_scores
from .token_frequency import frequency_buckets, frequency_table

__all__ = [
    "AttentionSummary",
    "summarize_attention",
    "plot_attention_maps",
    "plot_proximity_profiles",
    "ProximityCallback",
    "gradient_probe",
    "report_score_gradient",
    "row_split",
    "score_gradients",
    "positional_kernel",
    "diagonal_means",
    "relative_share",
    "plot_kernels",
    "ProximityStats",
    "proximity_scores",
    "frequency_buckets",
    "frequency_table",
    "weight_decay_sweep",
]
