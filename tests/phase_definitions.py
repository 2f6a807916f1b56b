"""Every phase definition the shipped entry points plan, listed: the guard of a refactor of the planning code.

A phase's definition (`hf_spt.runs.phase_definition`) is what a re-run must match, so two versions of the
code that plan the same definitions for every shipped command, recipe, grid, study and the LRA suite train the
same phases. This script plans each entry in `RUN_SPT_COMMANDS` and `GRIDS` without training anything, on
stand-in data: every task's builder is replaced by a tiny generated Markov set that encodes what it was asked
for (the task name, its options, its folder and seed), so a change in what reaches a builder changes the
definition, and no data files are needed. It writes one JSON mapping (entry -> phase folder -> definition).

    python tests/phase_definitions.py --write   # record tests/fixtures/phase_definitions.json (before a change)
    python tests/phase_definitions.py           # compare the code as it is with the record; exit 1 on a change

`tests/test_phase_definitions.py` runs the comparison. The record belongs to one transformers and datasets
version (definitions hold every `TrainingArguments` field): under others the test skips, naming them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import datasets  # noqa: E402
import transformers  # noqa: E402

RECORD = Path(__file__).with_name("fixtures") / "phase_definitions.json"
PRETRAINED = "PRETRAINED"  # replaced by a tiny local model's folder (a BERT with every weight zero)
PATH_FIELDS = frozenset({"output_dir", "logging_dir"})  # where the listing ran: left out
FINETUNE_CHECKPOINT = "hub-user/spt-checkpoint"  # a Hub id: its identity is the id, nothing is fetched

RUN_SPT_COMMANDS: dict[str, list[str]] = {
    "default": [],
    "mode spt": ["--mode", "spt"],
    "mode scratch": ["--mode", "scratch"],
    "mode finetune, hybrid init": ["--mode", "finetune", "--init_from", FINETUNE_CHECKPOINT, "--init_parts", "qk"],
    "generic and per-phase budgets": ["--num_train_epochs", "2", "--pretrain_epochs", "3", "--learning_rate", "5e-4",
                                      "--finetune_batch_size", "16", "--max_steps", "7", "--pretrain_max_steps", "5"],
    "per-phase over generic": ["--per_device_train_batch_size", "12", "--pretrain_learning_rate", "2e-3",
                               "--finetune_epochs", "1.5", "--finetune_max_steps", "3"],
    "masking, weights, stopping, parts": [
        "--mlm_probability", "0.3", "--mask_replace_prob", "1.0", "--random_replace_prob", "0", "--token_weighting",
        "inverse_frequency", "--class_weighting", "balanced", "--early_stopping_patience", "2", "--init_parts", "qk",
        "--freeze_parts", "mlp", "--pretrain_objective", "masked"],
    "trainer flags": ["--padding_free", "--optim", "adafactor", "--warmup_steps", "3",
                      "--weight_decay", "0.01", "--gradient_accumulation_steps", "2", "--per_device_eval_batch_size",
                      "5", "--metric_for_best_model", "loss", "--eval_strategy", "steps", "--eval_steps", "10",
                      "--save_strategy", "steps", "--save_steps", "10", "--train_sampling_strategy", "sequential",
                      "--seed", "3", "--bf16"],
    "model flags": ["--hidden_size", "32", "--num_hidden_layers", "1", "--num_attention_heads", "2",
                    "--intermediate_size", "48", "--position_embedding_type", "alibi", "--pooling", "max",
                    "--hidden_dropout_prob", "0.1", "--attn_implementation", "eager"],
    "model_type bert": ["--model_type", "bert", "--num_hidden_layers", "1", "--hidden_size", "32",
                        "--num_attention_heads", "2", "--intermediate_size", "40"],
    "lora fine-tuning": ["--mode", "scratch", "--finetune_method", "lora", "--lora_r", "4", "--lora_alpha", "16",
                         "--lora_target_modules", "q_proj,v_proj"],
    "lora_comparison": ["--mode", "lora_comparison", "--model_name_or_path", PRETRAINED, "--lora_r", "2",
                        "--max_steps", "2"],
    "recipe amos_lra listops": ["--recipe", "amos_lra", "--task", "listops", "--data_dir", "data/listops"],
    "recipe amos_lra image, flags over it": ["--recipe", "amos_lra", "--task", "image", "--data_dir", "data/image",
                                             "--pretrain_epochs", "4", "--learning_rate", "3e-4"],
    "recipe amos_lra text": ["--recipe", "amos_lra", "--task", "text", "--data_dir", "data/text"],
    "recipe amos_lra retrieval": ["--recipe", "amos_lra", "--task", "retrieval", "--data_dir", "data/retrieval"],
    "recipe amos_lra pathfinder": ["--recipe", "amos_lra", "--task", "pathfinder", "--data_dir", "data/pathfinder"],
    "recipe balestriero_huang": ["--recipe", "balestriero_huang", "--mode", "lora_comparison",
                                 "--model_name_or_path", PRETRAINED],
    "cross-task SPT": ["--task", "text", "--data_dir", "data/text", "--pretrain_task", "retrieval",
                       "--pretrain_data_dir", "data/retrieval", "--pretrain_task_options", '{"num_proc": 1}',
                       "--max_length", "64"],
    "custom data": ["--task", "custom", "--train_file", "train.csv", "--text_column", "a", "--text_pair_column",
                    "b", "--label_column", "y", "--max_length", "32", "--truncation",
                    "--task_options", '{"validation_fraction": 0.2}', "--preprocessing_num_workers", "2"],
    "task options": ["--task_options", '{"num_train": 300, "locality": 0.6}', "--max_length", "120"],
}
"""`run_spt.py` command lines (`PRETRAINED` stands for a local pretrained model)."""

CONFIG_FILE_COMMANDS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "config file under flags": ({"pretrain_epochs": 6, "finetune_learning_rate": 2e-3, "recipe": "amos_lra",
                                 "task": "listops"}, ["--num_train_epochs", "3", "--data_dir", "data/listops"]),
}
"""`run_spt.py --config_file FILE` with these settings in FILE, and these flags."""


def _grids() -> dict[str, Callable[[], Any]]:
    from hf_spt.experiments.suites.budget_study import study_grid, study_names
    from hf_spt.experiments.suites.grid import load_grid
    from hf_spt.experiments.suites.lra import LraSuite, lra_grid

    grids: dict[str, Callable[[], Any]] = {
        "ablation_default.yaml": lambda: load_grid(Path(__file__).parents[1] / "hf_spt/scripts/ablation_default.yaml"),
        "lra mini": lambda: lra_grid(LraSuite(output_dir="runs/lra_mini", scale="mini", seeds=[0, 1])),
        "lra full": lambda: lra_grid(LraSuite(output_dir="runs/lra", scale="full", seeds=[0])),
        "lra full, budgets and flags": lambda: lra_grid(LraSuite(
            output_dir="runs/lra", scale="full", seeds=[2], tasks=["listops"], finetune_epochs=3, pretrain_epochs=2,
            early_stopping_patience=1, training={"bf16": True}, model={"num_hidden_layers": 1})),
    }
    for name in study_names():
        grids[f"study {name}"] = functools.partial(study_grid, name, output_dir=f"runs/{name}")
    return grids


def _stand_in(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    """Task `name`'s builder (its signature kept, so its options are checked as before) replaced by a tiny Markov
    set whose content encodes the request."""
    from hf_spt.tasks.markov import load_markov
    from hf_spt.tasks.registry import TASKS

    @functools.wraps(real)
    def build(data_dir: str | None = None, seed: int = 0, **options: Any) -> Any:
        request = json.dumps({"task": name, "data_dir": data_dir, "seed": seed, "options": options},
                             sort_keys=True, default=str)
        task = load_markov(seed=int(hashlib.sha256(request.encode()).hexdigest()[:6], 16), num_train=12,
                           num_validation=4, num_test=4, length=8)
        preset = TASKS[name].preset
        task.preset = replace(preset, max_length=preset.max_length or 8, num_labels=preset.num_labels or 2)
        task.name, task.label_names = name, None
        task.is_pair = name == "retrieval" or bool(options.get("text_pair_column"))
        for split in list(task.dataset):
            data = task.dataset[split].add_column("request", [request] * len(task.dataset[split]))
            if task.is_pair:
                data = data.add_column("pair_input_ids", data["input_ids"], feature=data.features["input_ids"])
            task.dataset[split] = data
        return task

    return build


def _content_fingerprint(dataset: Any) -> str:
    """The data's rows as Python values, hashed: the stand-in's fingerprint, the same under any pyarrow."""
    return hashlib.sha256(json.dumps(dataset.to_dict(), sort_keys=True).encode()).hexdigest()[:32]


@contextmanager
def stand_in_data() -> Iterator[None]:
    """Every registered task built as a stand-in (see the module docstring) while inside."""
    from hf_spt.runs import phase_definition
    from hf_spt.tasks.registry import TASKS

    builders = {name: entry.builder for name, entry in TASKS.items()}
    fingerprint = phase_definition.dataset_fingerprint
    try:
        for name, entry in TASKS.items():
            entry.builder = _stand_in(name, builders[name])
        phase_definition.dataset_fingerprint = _content_fingerprint
        yield
    finally:
        for name, entry in TASKS.items():
            entry.builder = builders[name]
        phase_definition.dataset_fingerprint = fingerprint


def _pretrained_model(folder: Path) -> str:
    """A tiny BERT, every weight zero (the same bytes under any seed), saved in `folder`."""
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=300, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=4096)
    model = BertModel(config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
    model.save_pretrained(folder)
    return str(folder)


def _listed(phase: Any) -> dict[str, Any]:
    """A planned phase as listed: its definition, and the Trainer arguments a definition leaves out (how the phase
    reports and loads data: device defaults such as pinned memory), but the paths."""
    from hf_spt.runs.phase_definition import REPORTING_FIELDS

    arguments = phase.args.to_dict()
    return {"definition": phase.definition,
            "reporting": {key: arguments.get(key) for key in sorted(REPORTING_FIELDS - PATH_FIELDS)}}


def _run_spt_definitions(argv: list[str]) -> dict[str, Any]:
    from hf_spt.experiments.command_line import parse_arguments
    from hf_spt.experiments.pipeline import plan_experiment
    from hf_spt.experiments.run_spec import resolve_run

    return {phase.folder.name: _listed(phase) for phase in plan_experiment(resolve_run(*parse_arguments(argv)))[1]}


def _grid_definitions(grid: Any) -> dict[str, Any]:
    from hf_spt.experiments.suites.grid_runner import plan_grid

    return {str(phase.folder.relative_to(grid.output_dir)): _listed(phase) for phase in plan_grid(grid).values()}


def _portable(definitions: Any, pretrained: str) -> Any:
    """The definitions with the temporary model folder's path written as `PRETRAINED`."""
    return json.loads(json.dumps(definitions, sort_keys=True, default=str).replace(pretrained, PRETRAINED))


def list_definitions() -> dict[str, Any]:
    """Every entry's planned phase definitions, by entry name, then phase folder (relative to the output)."""
    listed: dict[str, Any] = {"versions": {"transformers": transformers.__version__, "datasets": datasets.__version__}}
    with tempfile.TemporaryDirectory() as temp, stand_in_data():
        pretrained = _pretrained_model(Path(temp) / "pretrained")
        output = ["--output_dir", str(Path(temp) / "run"), "--report_to", "none"]
        for name, argv in RUN_SPT_COMMANDS.items():
            argv = [pretrained if value == PRETRAINED else value for value in argv]
            listed[f"run_spt: {name}"] = _portable(_run_spt_definitions(argv + output), pretrained)
        for name, (settings, argv) in CONFIG_FILE_COMMANDS.items():
            config_file = Path(temp) / "settings.json"
            config_file.write_text(json.dumps(settings))
            listed[f"run_spt: {name}"] = _run_spt_definitions(argv + ["--config_file", str(config_file)] + output)
        for name, build in _grids().items():
            listed[f"grid: {name}"] = _grid_definitions(build())
    return json.loads(json.dumps(listed, sort_keys=True, default=str))


def differences(recorded: dict[str, Any], listed: dict[str, Any]) -> list[str]:
    """Each entry or phase whose definitions differ, with the first differing keys."""
    problems = []
    for entry in sorted(set(recorded) | set(listed)):
        if entry not in recorded or entry not in listed:
            problems.append(f"{entry}: {'new' if entry not in recorded else 'gone'}")
            continue
        for phase in sorted(set(recorded[entry]) | set(listed[entry])):
            old, new = recorded[entry].get(phase), listed[entry].get(phase)
            if old != new:
                keys = sorted(k for k in set(old or {}) | set(new or {})
                              if (old or {}).get(k) != (new or {}).get(k)) if isinstance(old, dict) else []
                problems.append(f"{entry} / {phase}: {keys[:6] or 'differs'}")
    return problems


def main(argv: list[str]) -> int:
    listed = list_definitions()
    if "--write" in argv:
        RECORD.write_text("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in listed.items())
                          + "\n}\n")  # an entry a line
        print(f"wrote {RECORD}: {sum(len(v) for k, v in listed.items() if k != 'versions')} phases, "
              f"{len(listed) - 1} entries")
        return 0
    problems = differences(json.loads(RECORD.read_text()), listed)
    print("\n".join(problems) or "every phase definition as recorded")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parents[1]))
    sys.exit(main(sys.argv[1:]))
