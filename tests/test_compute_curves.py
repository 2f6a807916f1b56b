"""Accuracy against total compute: FLOPs counted from the shapes (checked against torch's flop counter), curves
read from the log history, seeds combined, and the report of a tiny study on the user's own files."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from torch.utils.flop_counter import FlopCounterMode

from hf_spt.analysis.compute import ComputeCurve, arm_curve, epoch_accuracies, forward_flops, training_flops
from hf_spt.errors import UserInputError
from hf_spt.reports.compute_report import compute_markdown, read_compute_curves
from hf_spt.models import SptConfig, SptForMaskedLM, SptForSequenceClassification
from hf_spt.scripts import run_budget_study, run_compute_curves
from hf_spt.tasks import load_task


def test_the_count_follows_the_shapes_with_the_quadratic_attention_term():
    config = SimpleNamespace(hidden_size=4, num_hidden_layers=2, intermediate_size=8, vocab_size=10, num_labels=3)
    per_layer = 8 * 5 * 16 + 4 * 25 * 4 + 4 * 5 * 4 * 8  # projections, scores and mix, MLP (n = 5, d = 4, f = 8)
    assert forward_flops(config, [5]) == 2 * per_layer + 2 * 2 * 4 * 3
    assert forward_flops(config, [5], "masked_lm") == 2 * per_layer + 2 * 5 * (16 + 40)
    assert training_flops(config, [5, 5]) == 3 * forward_flops(config, [5, 5])
    long, short = forward_flops(config, [400]), forward_flops(config, [200])
    assert long > 2.5 * short  # attention grows with n²


@pytest.mark.parametrize("head", ["masked_lm", "classifier"])
def test_the_count_matches_torchs_flop_counter_on_the_real_model(head):
    config = SptConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                       max_position_embeddings=128, num_labels=3, pooling="mean", attn_implementation="eager")
    model = (SptForMaskedLM if head == "masked_lm" else SptForSequenceClassification)(config).eval()
    batch, length = 3, 96
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(input_ids=torch.randint(5, 40, (batch, length)))
    counted = counter.get_total_flops()
    assert counted == pytest.approx(forward_flops(config, [length] * batch, head), rel=0.01)


def test_curves_read_the_epochs_of_training_and_combine_seeds():
    history = [{"loss": 1.0, "epoch": 1.0, "step": 4}, {"eval_accuracy": 0.5, "epoch": 1.0, "step": 4},
               {"eval_accuracy": 0.7, "epoch": 2.0, "step": 8}, {"eval_accuracy": 0.6, "epoch": 3.0, "step": 12},
               {"train_runtime": 1.0, "epoch": 3.0, "step": 12}, {"eval_accuracy": 0.7, "epoch": 3.0, "step": 12}]
    assert epoch_accuracies(history) == [(1.0, 0.5), (2.0, 0.7), (3.0, 0.6)]
    long = ComputeCurve("c", "scratch", 0, 0.0, 10.0, epoch_accuracies(history))
    short = ComputeCurve("c", "scratch", 1, 0.0, 10.0, [(1.0, 0.3), (2.0, 0.5)])
    assert long.flops() == [10.0, 20.0, 30.0] and long.running_best() == [0.5, 0.7, 0.7]
    combined = arm_curve([long, short])  # the stopped seed keeps its best; FLOPs per epoch as the others spend
    assert combined.best_so_far == pytest.approx([0.4, 0.6, 0.6]) and combined.flops == [10.0, 20.0, 30.0]
    assert combined.lowest_so_far == [0.3, 0.5, 0.5] and combined.highest_so_far == [0.5, 0.7, 0.7]  # the band
    # the kept checkpoint (its test accuracy's): the first epoch of the best validation, 0.7 at epoch 2 not 3
    assert long.kept_flops() == 20.0 and short.kept_flops() == 20.0
    assert combined.first_reaching(0.6) == 20.0 and combined.first_reaching(0.65) is None
    assert combined.total_flops == 25.0
    spt = ComputeCurve("c", "spt", 0, 100.0, 10.0, [(1.0, 0.65)])
    table = compute_markdown([long, short, spt])
    assert "| spt | 65.0 | 1.10e+02 | never |" in table  # scratch's mean best-so-far stops at 60%


def test_reports_round_halves_up_and_print_the_same_digits_in_every_table():
    """86.25, 88.5, 84% has a mean of 86.25 and a std of exactly 2.25 points; a reader rounds them to 86.3 and
    2.3, and so must both tables of a study (float arithmetic printed with `:.1f` gave 86.2 and, depending on
    whether percent came first, 2.2 or 2.3). 64.0 and 63.5% average 63.75: "63.8"."""
    from hf_spt.reports.budget_report import _pct, _points
    from hf_spt.reports.seed_tables import mean_std

    tests = [0.8625, 0.885, 0.84]
    curves = [ComputeCurve("c", "spt", seed, 0.0, 1.0, [(1.0, 0.5)], test) for seed, test in enumerate(tests)]
    assert _pct(mean_std(tests)) == "86.3 ± 2.3 (3)" and "| 86.3 ± 2.3 |" in compute_markdown(curves)
    assert _pct(mean_std([0.64, 0.635])) == "63.8 ± 0.4 (2)"
    assert "| test %, mean ± sample std over seeds |" in compute_markdown(curves)
    assert (_points(0.6375 - 0.67), _points(0.0), _points(0.00025)) == ("-3.3", "+0.0", "+0.0")


def test_one_seed_has_no_spread_in_any_table():
    """A std over one seed is undefined: "n/a", not "± 0.0", in the budget and compute tables."""
    from hf_spt.reports.budget_report import _pct
    from hf_spt.reports.seed_tables import mean_std

    assert _pct(mean_std([0.55])) == "55.0 ± n/a (1)"
    assert "| 55.0 ± n/a |" in compute_markdown([ComputeCurve("c", "spt", 0, 0.0, 1.0, [(1.0, 0.5)], 0.55)])


def _write_csv(path: Path, rows: list[tuple[str, str]]) -> str:
    path.write_text("text,label\n" + "".join(f"{text},{label}\n" for text, label in rows))
    return str(path)


def test_a_study_on_the_users_own_files_reports_accuracy_against_compute(tmp_path):
    torch.set_num_threads(1)
    examples = [("ab" * (3 + i % 5) + "c" * (i % 3), "yes" if i % 2 else "no") for i in range(24)]
    files = {f"{split}_file": _write_csv(tmp_path / f"{split}.csv", rows)
             for split, rows in (("train", examples), ("validation", examples[:8]), ("test", examples[8:16]))}
    study = {"output_dir": str(tmp_path / "run"), "seeds": [0],
             "tasks": {"mine": {"task": "custom", "task_options": files}},
             "experiment": {"finetune_epochs": 2, "report_to": "none", "per_device_train_batch_size": 8},
             "model": {"num_hidden_layers": 1, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 16},
             "arms": [{"name": "scratch"}, {"name": "spt_e1", "pretrain_epochs": 1}]}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    run_budget_study.run(run_budget_study.BudgetStudyArguments(study=str(tmp_path / "study.yaml"), probe_examples=4))
    run = tmp_path / "run"
    curves = {curve.arm: curve for curve in read_compute_curves(run / "budget_study_compute.json")}
    assert set(curves) == {"scratch", "spt_e1"} and len(curves["scratch"].points) == 2
    lengths = [len(ids) for ids in load_task("custom", **files).dataset["train"]["input_ids"]]
    assert len(set(lengths)) > 3  # each row counted at its own length, padding excluded
    model = json.loads((run / "cells/mine/scratch/seed0/config.json").read_text())
    assert curves["scratch"].flops_per_epoch == training_flops(SimpleNamespace(**model), lengths)
    assert curves["scratch"].pretrain_flops == 0 and curves["spt_e1"].pretrain_flops > 0
    assert curves["spt_e1"].flops()[0] == curves["spt_e1"].pretrain_flops + curves["scratch"].flops_per_epoch
    assert (run / "budget_study_compute_mine.png").stat().st_size > 0
    assert "| SPT arm |" in (run / "budget_study_compute.md").read_text()
    # the standalone script redraws from the folder, or from the JSON without the run folders
    run_compute_curves.run(run_compute_curves.ComputeCurveArguments(runs=str(run / "budget_study_compute.json"),
                                                                     output_dir=str(tmp_path / "again"), prefix="mine"))
    assert (tmp_path / "again/mine_compute.md").read_text() == (run / "budget_study_compute.md").read_text()
    with pytest.raises(UserInputError, match="prefix"):
        run_compute_curves.run(run_compute_curves.ComputeCurveArguments(runs=str(run), prefix="../x"))
