"""Each arm's numbers come from the weights they claim (issue 15, item 15): tiny runs that can fail.

The SPT arm starts from the pretraining phase's encoder; the pretraining folder's root is its
best-validation checkpoint; test metrics come from the best fine-tuning checkpoint; one seed gives
one result; scratch and hybrid arms of a seed start from the same random weights; the ablation's
compute-matched arm trains for pretraining plus fine-tuning epochs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tiny_backbone_runs import tiny_arguments

import hf_spt.experiments.phases as phases
import hf_spt.experiments.pipeline as pipeline
from hf_spt.experiments.suites.grid_runner import run_grid
from hf_spt.experiments.suites.grid import Cell, parse_grid
from hf_spt.training.finetune_trainer import FinetuneTrainer
from hf_spt.training.parts import select_keys


@pytest.fixture
def starts(monkeypatch) -> dict[str, dict[str, torch.Tensor]]:
    """Each fine-tuning arm's weights when its Trainer is built, before the first step, by phase folder name."""
    recorded: dict[str, dict[str, torch.Tensor]] = {}

    class Recording(FinetuneTrainer):
        def __init__(self, model, args, *rest, **kwargs):
            recorded[Path(args.output_dir).name] = {k: v.detach().clone() for k, v in model.state_dict().items()}
            super().__init__(model, args, *rest, **kwargs)

    monkeypatch.setattr(phases, "FinetuneTrainer", Recording)
    return recorded


def run(folder: Path, finetune_epochs: float = 1, **settings) -> dict:
    """A tiny run, pretraining 3 epochs (so that the best and the last checkpoint may differ)."""
    data_args, model_args, exp, training = tiny_arguments(folder, **settings)
    exp.pretrain_epochs, exp.finetune_epochs = 3, finetune_epochs
    return pipeline.run_experiment(data_args, model_args, exp, training)


def best_step(folder: Path, metric: str, greater: bool) -> int:
    """The step of the best evaluation in the phase's log history."""
    history = json.loads((folder / "log_history.json").read_text())
    evaluations = [entry for entry in history if metric in entry]
    ordered = sorted(evaluations, key=lambda entry: (-entry[metric] if greater else entry[metric], entry["step"]))
    return ordered[0]["step"]


def same_tensors(one: dict[str, torch.Tensor], two: dict[str, torch.Tensor], keys) -> bool:
    return all(torch.equal(one[key], two[key]) for key in keys)


def test_spt_arm_starts_from_the_best_pretraining_checkpoint(tmp_path, starts):
    run(tmp_path)
    pretrain = tmp_path / "pretrain"
    root = load_file(pretrain / "model.safetensors")
    step = best_step(pretrain, "eval_loss", greater=False)
    state = json.loads(sorted(pretrain.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))[-1]
                       .joinpath("trainer_state.json").read_text())
    assert state["best_model_checkpoint"].endswith(f"checkpoint-{step}")
    best = load_file(pretrain / f"checkpoint-{step}" / "model.safetensors")
    assert root.keys() == best.keys() and same_tensors(root, best, root)
    encoder = [key for key in root if key.startswith("spt.") and key in starts["spt"]]
    assert len(encoder) > 10 and same_tensors(root, starts["spt"], encoder)
    assert not same_tensors(root, starts["scratch"], encoder), "the scratch arm must not start from SPT weights"


SEED_BEST_NOT_LAST = 0  # with this seed and rate, validation accuracy peaks at epoch 1 of 4 (0.5, then below)


def test_test_metrics_come_from_the_best_validation_checkpoint(tmp_path):
    run(tmp_path, mode="scratch", finetune_epochs=4, finetune_learning_rate=3e-2, seed=SEED_BEST_NOT_LAST)
    scratch = tmp_path / "scratch"
    history = json.loads((scratch / "log_history.json").read_text())
    accuracies = [entry["eval_accuracy"] for entry in history if "eval_accuracy" in entry][:4]
    step = best_step(scratch, "eval_accuracy", greater=True)
    last = max(entry["step"] for entry in history)
    assert step != last, f"not a case where best and last differ: {accuracies}"
    result = json.loads((scratch / "phase.json").read_text())
    assert result["eval_accuracy"] == max(accuracies)
    root, best = load_file(scratch / "model.safetensors"), load_file(scratch / f"checkpoint-{step}" / "model.safetensors")
    assert same_tensors(root, best, root)


def test_the_same_seed_gives_the_same_arms(tmp_path):
    one, two = run(tmp_path / "one"), run(tmp_path / "two")
    volatile = ("seconds", "pretrain_seconds", "init_from")
    strip = [[{k: v for k, v in arm.items() if k not in volatile} for arm in r["arms"]] for r in (one, two)]
    assert strip[0] == strip[1] and len(strip[0]) == 2


def test_scratch_and_hybrid_arms_of_a_seed_share_their_initial_weights(tmp_path, starts):
    run(tmp_path, init_parts="qk")
    scratch, hybrid = starts["scratch"], starts["spt"]
    qk = set(select_keys(hybrid, "qk"))
    pretrained = load_file(tmp_path / "pretrain" / "model.safetensors")
    assert qk and same_tensors(hybrid, pretrained, qk)
    assert same_tensors(scratch, hybrid, [key for key in scratch if key not in qk])


def test_the_compute_matched_arm_trains_pretrain_plus_finetune_epochs(tmp_path):
    grid = parse_grid({
        "output_dir": str(tmp_path), "seeds": [0],
        "tasks": {"m": {"task": "markov", "task_options": {"num_train": 32, "num_validation": 16, "num_test": 16,
                                                            "length": 12}}},
        "experiment": {"pretrain_epochs": 2, "finetune_epochs": 1, "report_to": "none", "use_cpu": True},
        "model": {"num_hidden_layers": 1, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 16},
        "arms": [{"name": "scratch"}, {"name": "matched", "compute_matched": True}],
    })
    run_grid(grid)
    epochs = {arm: json.loads((Cell("m", arm, 0).folder(grid) / "log_history.json").read_text())[-1]["epoch"]
              for arm in ("scratch", "matched")}
    assert epochs == {"scratch": 1.0, "matched": 3.0}
