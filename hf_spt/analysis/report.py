"""One analysis report for one or several saved SPT models on a task: PNGs, report.md, report.json.

Models are the folders `run_spt.py` writes (OUTPUT_DIR/pretrain, /spt, /scratch, or any
`save_pretrained` folder of an SPT model); several are analysed side by side on the same
sequences. Sections: proximity of attention (every model), positional kernel (additive
positions only), proximity during training (when the folder has the callback's
`proximity_log.json`), the score-gradient probe (at a fresh init of the first model's config),
and MLM loss by token frequency (MLM models, plus an optional weight-decay sweep).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig

from ..atomic_files import write_json, write_text
from ..training.checkpoints import check_weights_readable, resolve_model_folder
from ..training.collators import DataCollatorForClassification, DataCollatorForSpt
from ..training.hub_kernels import WITHOUT_HUB_KERNELS
from ..models.modeling_spt import SptForMaskedLM, SptForSequenceClassification
from ..tasks import Task
from .attention_maps import plot_attention_maps, plot_proximity_profiles, summarize_attention
from .callback import PROXIMITY_LOG_NAME
from .gradient_probe import gradient_probe
from .plotting import saved_figure
from .positional_kernel import plot_kernels, positional_kernel, relative_share
from .decay_sweep import weight_decay_sweep
from .token_frequency import bucket_markdown, frequency_table, plot_bucket_losses, token_counts


@dataclass
class ReportOptions:
    """What the report measures and on how much data (run_analysis.py has a flag per field)."""

    split: str = field(default="validation", metadata={"help": "Split whose inputs the attention probes read."})
    num_examples: int = field(default=256, metadata={"help": "Sequences of that split to analyse."})
    near: int = field(default=2, metadata={"help": "Proximity window: attention mass within |i - j| <= near."})
    probe_batch_size: int = field(default=64, metadata={"help": "Training sequences in the gradient-probe batch."})
    frequency_buckets: int = field(default=4, metadata={"help": "Token-frequency buckets (equal numbers of types)."})
    weight_decay_sweep: list[float] = field(
        default_factory=list, metadata={"help": "Weight decays of tiny MLMs to train for the frequency sweep (none: skip)."}
    )
    sweep_epochs: float = field(default=1.0, metadata={"help": "Epochs of each sweep MLM."})
    seed: int = field(default=0, metadata={"help": "Seed of task generation, masking and probe init."})


def model_names(folders: list[Path]) -> list[str]:
    """Short unique names: the folder name, or parent_name when two folders share a name."""
    names = [folder.name for folder in folders]
    if len(set(names)) < len(names):
        names = [f"{folder.parent.name}_{folder.name}" for folder in folders]
    return names


def load_for_analysis(folder: Path) -> SptForMaskedLM | SptForSequenceClassification:
    """The saved model in float32 on the CPU, with the head it was trained with."""
    config = AutoConfig.from_pretrained(folder)
    is_mlm = "SptForMaskedLM" in (config.architectures or [])
    model_class = SptForMaskedLM if is_mlm else SptForSequenceClassification
    return model_class.from_pretrained(folder, attn_implementation="eager", **WITHOUT_HUB_KERNELS).eval()


def _proximity_section(names, summaries, near, folder: Path) -> tuple[dict, list[str]]:
    data, lines = {}, ["## Attention proximity", "",
                       f"Attention mass within |i - j| <= {near} and expected |i - j|, as ratios to uniform attention over "
                       "the same real tokens (1 = no preference for neighbours).", "",
                       f"| model | layer | near{near} ratio (head mean) | mean-distance ratio | near{near} ratio per head |",
                       "|---|---|---|---|---|"]
    images = []
    for name, summary in zip(names, summaries):
        data[name] = [stats.scores() for stats in summary.proximity]
        for layer, scores in enumerate(data[name]):
            per_head = ", ".join(f"{r:.2f}" for r in scores[f"near{near}_ratio"])
            lines.append(f"| {name} | {layer} | {scores[f'near{near}_ratio_mean']:.2f} "
                         f"| {scores['mean_distance_ratio_mean']:.2f} | {per_head} |")
        images += [f"![{name} attention]({path.name})" for path in plot_attention_maps(summary.mean_maps, folder, name)]
    lines += ["", *images]
    profile = plot_proximity_profiles({n: s.proximity[0].profile() for n, s in zip(names, summaries)},
                                      folder / "proximity_profile.png", "Proximity profile, layer 0")
    lines += ["", f"![proximity profile]({profile.name})", ""]
    return data, lines


def _kernel_section(names, models, length, folder: Path) -> tuple[dict, list[str]]:
    data, lines = {}, ["## Positional kernel P W_Q W_K^T P^T (layer 0)", "",
                       "Share of each head's kernel variance explained by a function of i - j alone "
                       "(hf_spt.analysis.positional_kernel documents the LayerNorm and bias choices).", "",
                       "| model | mean over heads | per head |", "|---|---|---|"]
    for name, model in zip(names, models):
        try:
            kernel = positional_kernel(model, length=length)
        except ValueError as error:
            lines.append(f"| {name} | n/a | {error} |")
            continue
        shares = relative_share(kernel).tolist()
        data[name] = {"relative_share": shares, "relative_share_mean": sum(shares) / len(shares)}
        lines.append(f"| {name} | {data[name]['relative_share_mean']:.3f} | {', '.join(f'{s:.3f}' for s in shares)} |")
        plot_kernels(kernel, folder / f"{name}_kernel.png", name)
    lines += ["", *[f"![{n} kernel]({n}_kernel.png)" for n in data], ""]
    return data, lines


def _training_section(names, folders, near, folder: Path) -> tuple[dict, list[str]]:
    logs = {n: json.loads((f / PROXIMITY_LOG_NAME).read_text()) for n, f in zip(names, folders)
            if (f / PROXIMITY_LOG_NAME).is_file()}
    if not logs:
        return {}, []
    key = f"proximity/layer0/near{near}_ratio"
    lines = ["## Proximity during training (ProximityCallback)", "", f"| model | first {key} | last | max |", "|---|---|---|---|"]
    with saved_figure(folder / "proximity_during_training.png", figsize=(5, 3.5)) as (_, axis):
        for name, records in logs.items():
            values = [r[key] for r in records if key in r]
            if not values:
                continue
            lines.append(f"| {name} | {values[0]:.2f} | {values[-1]:.2f} | {max(values):.2f} |")
            axis.plot([r["step"] for r in records if key in r], values, marker=".", label=name)
        axis.axhline(1.0, color="grey", linestyle=":", label="uniform")
        axis.set_xlabel("training step")
        axis.set_ylabel(f"near{near} ratio to uniform (layer 0)")
        axis.legend()
    return logs, lines + ["", "![proximity during training](proximity_during_training.png)", ""]


def _gradient_section(config, task: Task, args: ReportOptions, folder: Path) -> tuple[dict, list[str]]:
    if config.two_tower:
        return {}, ["## Score-gradient probe", "", "Skipped: the probe handles single-sequence tasks only.", ""]
    train = task.dataset["train"].select(range(min(args.probe_batch_size, len(task.dataset["train"]))))
    features = [{"input_ids": ids, "labels": label} for ids, label in zip(train["input_ids"], train["labels"])]
    labelled = DataCollatorForClassification(task.tokenizer)(features)
    masking = DataCollatorForSpt(task.tokenizer, mlm_probability=task.preset.mlm_probability, seed=args.seed)
    masked = masking([{"input_ids": ids} for ids in train["input_ids"]])
    probe_config = config.__class__.from_dict(config.to_dict())
    report = gradient_probe(probe_config, dict(masked), labelled, seed=args.seed)
    lines = ["## Score-gradient probe (layer 0, float64)", "",
             f"Gradients of the mean loss over {len(train)} training sequences w.r.t. the attention scores, at a fresh "
             "random init of the model's config and at exactly uniform attention (W_Q = W_K = 0). `averaged` is the "
             "data average of each example's score gradient; coherence = |orthogonal part of the average| / mean "
             "|orthogonal part per example| (0: the examples cancel).", "",
             "| state | loss | averaged, all-ones part | averaged, orthogonal | per example, orthogonal | coherence |",
             "|---|---|---|---|---|---|"]
    for state, losses in report.items():
        for loss, layers in losses.items():
            r = layers[0]
            lines.append(f"| {state} | {loss} | {r['averaged_along_ones']:.2e} | {r['averaged_orthogonal']:.2e} "
                         f"| {r['per_example_orthogonal']:.2e} | {r['coherence']:.3f} |")
    _plot_gradient_offsets(report["uniform_attention"], folder / "score_gradient_by_offset.png")
    return report, lines + ["", "![score gradient by offset](score_gradient_by_offset.png)", ""]


def _plot_gradient_offsets(losses: dict[str, list[dict[str, Any]]], path: Path, window: int = 20) -> None:
    with saved_figure(path, figsize=(5, 3.5)) as (_, axis):
        for loss, layers in losses.items():
            values = layers[0]["averaged_orthogonal_by_offset"]
            centre = len(values) // 2
            reach = min(window, centre)
            offsets = list(range(-reach, reach + 1))
            axis.plot(offsets, [-values[centre + d] for d in offsets], marker=".", label=loss)
        axis.set_xlabel("j - i")
        axis.set_ylabel("descent direction (-grad), diagonal mean")
        axis.set_title("Averaged score gradient at uniform attention")
        axis.legend()


def _frequency_section(names, models, config, task: Task, args: ReportOptions, folder: Path):
    train, evaluation = task.dataset["train"]["input_ids"], task.dataset[args.split]["input_ids"][: args.num_examples]
    # a task with fewer token types than buckets (Pathfinder's two pixel values) gets one bucket per type, said below
    types = int((token_counts(train, config.vocab_size, task.tokenizer.all_special_ids) > 0).sum())
    buckets = min(args.frequency_buckets, types)
    tables = {name: frequency_table(model, train, evaluation, task.tokenizer, buckets,
                                    task.preset.mlm_probability, seed=args.seed)
              for name, model in zip(names, models) if isinstance(model, SptForMaskedLM)}
    if args.weight_decay_sweep:
        tables.update(weight_decay_sweep(config, task.dataset["train"], task.dataset[args.split], task.tokenizer,
                                         args.weight_decay_sweep, epochs=args.sweep_epochs,
                                         num_buckets=buckets, mlm_probability=task.preset.mlm_probability,
                                         seed=args.seed))
    if not tables:
        return {}, []
    plot_bucket_losses(tables, folder / "token_frequency.png", "MLM loss by token frequency")
    fewer = (f" Only {types} token types occur in training: {buckets} buckets instead of --frequency_buckets "
             f"{args.frequency_buckets}." if buckets < args.frequency_buckets else "")
    return tables, ["## MLM loss by token frequency", "", "Buckets hold equal numbers of token types, counted on the "
                    f"training inputs (bucket 0 = most frequent).{fewer} `unigram loss`: the same masked tokens predicted from "
                    "their training frequency alone, without context; a model not below it has learned nothing from "
                    "the context.", "", bucket_markdown(tables),
                    "![token frequency](token_frequency.png)", ""]


def analyse_models(
    task: Task, model_paths: list[str | Path], output_dir: str | Path, args: ReportOptions | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run every probe on the models in `model_paths` (model folders or Trainer runs) on `task`'s data,
    and write the report into `output_dir`; return it. `provenance` (the code and numerics computing it, as the
    command line records them) goes into the report as given."""
    args = args or ReportOptions()
    torch.manual_seed(args.seed)
    model_folders = [resolve_model_folder(path) for path in model_paths]
    for model_folder in model_folders:  # a corrupt weight file is named, not a deserialisation traceback
        check_weights_readable(model_folder)
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    names = model_names([Path(path) for path in model_paths])
    models = [load_for_analysis(path) for path in model_folders]
    if args.split not in task.dataset:
        raise ValueError(f"Task {task.name!r} has no split {args.split!r}; choose one of {list(task.dataset)}.")
    sequences = task.dataset[args.split]["input_ids"][: args.num_examples]
    summaries = [summarize_attention(model, sequences, task.tokenizer, near=args.near) for model in models]
    length = max(len(ids) for ids in sequences)
    report: dict[str, Any] = {"task": task.name, "models": dict(zip(names, map(str, model_folders))),
                              "num_examples": len(sequences)}
    lines = [f"# Mechanism analysis: {task.name}", "",
             "| model | folder |", "|---|---|", *[f"| {n} | {f} |" for n, f in zip(names, model_folders)], ""]
    if provenance is not None:
        report["provenance"] = dict(provenance)
        numerics = (provenance.get("numerics") or {}).get("label", "not recorded")
        lines += [f"Computed at commit {provenance.get('commit', 'not recorded')}, {numerics} CPU numerics, "
                  f"{provenance.get('torch_threads', '?')} torch thread(s).", ""]
    sections = (
        ("proximity", lambda: _proximity_section(names, summaries, args.near, folder)),
        ("positional_kernel", lambda: _kernel_section(names, models, length, folder)),
        ("proximity_during_training", lambda: _training_section(names, [Path(p) for p in model_paths], args.near, folder)),
        ("gradient_probe", lambda: _gradient_section(models[0].config, task, args, folder)),
        ("token_frequency", lambda: _frequency_section(names, models, models[0].config, task, args, folder)),
    )
    for key, build in sections:
        report[key], section_lines = build()
        lines += section_lines
    write_json(folder / "report.json", report)
    write_text(folder / "report.md", "\n".join(lines) + "\n")
    return report


__all__ = ["ReportOptions", "model_names", "load_for_analysis", "analyse_models"]
