"""Budget study: pretraining-budget arms with their compute-matched controls, a locality control, rows with token
counts, checkpoint probes, the report; shipped studies parse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from hf_spt.errors import UserInputError
from hf_spt.reports.budget_report import study_markdown
from hf_spt.reports.budget_sources import combined_reports
from hf_spt.experiments.suites.budget_study import arm_kind, study_grid, study_names
from hf_spt.reports.study_evidence import study_evidence, summarize_study
from hf_spt.experiments.suites.grid import Arm, parse_grid
from hf_spt.experiments.phases import LOG_HISTORY_NAME
from hf_spt.scripts import run_budget_study

TRAIN, LENGTH = 32, 12
NO_EVIDENCE: dict = {"paired": [], "pooled": []}  # a table without rows to pair
STUDY = {
    "seeds": [0],
    "tasks": {"m": {"task": "markov", "task_options": {"num_train": TRAIN, "num_validation": 16, "num_test": 16,
                                                        "length": LENGTH}}},
    "experiment": {"finetune_epochs": 1, "report_to": "none", "per_device_train_batch_size": 8},
    "model": {"num_hidden_layers": 1, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 16},
    "arms": [{"name": "scratch"}, {"name": "scratch_alibi", "model": {"position_embedding_type": "alibi"}},
             {"name": "spt_e1", "pretrain_epochs": 1}, {"name": "scratch_compute_matched_e1", "compute_matched": True,
                                                         "pretrain_epochs": 1},
             {"name": "spt_e2", "pretrain_epochs": 2}, {"name": "scratch_compute_matched_e2", "compute_matched": True,
                                                         "pretrain_epochs": 2}],
}


def _max_steps(folder: Path) -> int:
    history = json.loads((folder / LOG_HISTORY_NAME).read_text())
    return max(entry["step"] for entry in history)


def test_budget_study_runs_end_to_end_and_reports_tokens_controls_and_probes(tmp_path):
    torch.set_num_threads(1)
    study_file = tmp_path / "study.yaml"
    study_file.write_text(yaml.safe_dump({**STUDY, "output_dir": str(tmp_path / "run")}))
    run_budget_study.run(run_budget_study.BudgetStudyArguments(study=str(study_file), probe_examples=8))
    run = tmp_path / "run"
    rows = json.loads((run / "budget_study.json").read_text())
    by_name = {row["arm_name"]: row for row in rows}
    assert set(by_name) == {arm["name"] for arm in STUDY["arms"]}
    tokens_per_epoch = TRAIN * LENGTH  # Markov sequences have no padding: every token is real
    assert by_name["spt_e2"]["arm"] == "spt" and by_name["spt_e2"]["pretrain_tokens"] == 2 * tokens_per_epoch
    matched = by_name["scratch_compute_matched_e2"]
    assert matched["arm"] == "scratch_compute_matched" and matched["pretrain_tokens"] == 0
    assert matched["budget_tokens"] == 2 * tokens_per_epoch and matched["pretrain_epochs"] == 2
    assert by_name["scratch"]["budget_tokens"] == 0 and by_name["scratch_alibi"]["model"] == {
        "position_embedding_type": "alibi"}
    assert all(0 <= row["test_accuracy"] <= 1 for row in rows)
    # the compute-matched arm of each budget trains for SPT's steps at that budget: (epochs + 1) x 4 batches
    assert _max_steps(run / "cells/m/scratch_compute_matched_e1/seed0") == 2 * 4
    assert _max_steps(run / "cells/m/scratch_compute_matched_e2/seed0") == 3 * 4
    config = json.loads((run / "cells/m/scratch_alibi/seed0/config.json").read_text())  # the trained model's
    assert config["position_embedding_type"] == "alibi"
    checkpoints = json.loads((run / "budget_study_checkpoints.json").read_text())
    assert [c["pretrain_epochs"] for c in checkpoints] == [1.0, 2.0]
    assert all(c["mlm_loss"] > 0 and c["unigram_loss"] > 0 and len(c["near_ratio_by_layer"]) == 1 for c in checkpoints)
    assert (run / "pretrain/m_e1_L1_s0/checkpoint_probe.json").exists()
    report = (run / "budget_study.md").read_text()
    assert "| 2 | 7.68e+02 |" in report and "| scratch_alibi |" in report
    assert (run / "budget_study.png").stat().st_size > 0
    # issue 65: every arm's attention after fine-tuning, probed once per cell, in a table and a figure
    attention = json.loads((run / "budget_study_attention.json").read_text())
    assert {row["arm_name"] for row in attention} == set(by_name) and all(
        len(row["near_ratio_by_layer"]) == len(row["profile_by_layer"]) == 1 and row["near_ratio_by_layer"][0] > 0
        and len(row["profile_by_layer"][0]) == len(row["distances"]) for row in attention)
    assert (run / "cells/m/spt_e1/seed0/attention_probe.json").exists()
    assert "## Attention after fine-tuning (exploratory)" in report and "| m | spt_e1 | 0 |" in report
    assert (run / "budget_study_attention.png").stat().st_size > 0
    combined = tmp_path / "combined"
    run_budget_study.run(run_budget_study.BudgetStudyArguments(combine=str(run), output_dir=str(combined)))
    assert json.loads((combined / "budget_study_attention.json").read_text()) == attention


def test_a_whole_budget_control_trains_every_step_where_patience_stops_the_other(tmp_path):
    """`early_stopping: false`: the compute-matched arm trains SPT's whole step budget, no patience in its recorded
    definition, while the arm with the study's patience (1 evaluation) may stop early; both are paired with SPT."""
    torch.set_num_threads(1)
    study = {**STUDY, "output_dir": str(tmp_path / "run"),
             "experiment": {**STUDY["experiment"], "finetune_epochs": 6, "early_stopping_patience": 1},
             "arms": [{"name": "spt_e1", "pretrain_epochs": 1},
                      {"name": "scratch_compute_matched_e1", "compute_matched": True, "pretrain_epochs": 1},
                      {"name": "scratch_compute_matched_full_e1", "compute_matched": True, "pretrain_epochs": 1,
                       "early_stopping": False}]}
    study_file = tmp_path / "study.yaml"
    study_file.write_text(yaml.safe_dump(study))
    run_budget_study.run(run_budget_study.BudgetStudyArguments(study=str(study_file), probe_examples=8))
    cells = tmp_path / "run" / "cells" / "m"
    assert _max_steps(cells / "scratch_compute_matched_full_e1" / "seed0") == (1 + 6) * 4  # SPT's 1 + 6 epochs
    definitions = {arm: json.loads((cells / arm / "seed0" / "phase_definition.json").read_text())
                   for arm in ("scratch_compute_matched_e1", "scratch_compute_matched_full_e1")}
    assert definitions["scratch_compute_matched_e1"]["early_stopping_patience"] == 1
    assert definitions["scratch_compute_matched_full_e1"]["early_stopping_patience"] is None
    rows = json.loads((tmp_path / "run" / "budget_study.json").read_text())
    assert {row["arm"] for row in rows} == {"spt", "scratch_compute_matched", "scratch_compute_matched_full"}
    assert "scratch_compute_matched_full" in (tmp_path / "run" / "budget_study.md").read_text()


def test_a_run_naming_a_new_seed_reports_the_seeds_the_folder_already_holds(tmp_path, capsys):
    """`--seeds 1` into a folder that holds seed 0 trains seed 1 only and reports both (it reported seed 1 alone)."""
    torch.set_num_threads(1)
    study_file = tmp_path / "study.yaml"
    arms = [arm for arm in STUDY["arms"] if arm["name"] in ("scratch", "spt_e1")]
    study_file.write_text(yaml.safe_dump({**STUDY, "arms": arms, "output_dir": str(tmp_path / "run")}))
    run_budget_study.run(run_budget_study.BudgetStudyArguments(study=str(study_file), probe_examples=8))
    seed0 = tmp_path / "run/cells/m/scratch/seed0/phase.json"
    first = seed0.read_text()
    capsys.readouterr()
    run_budget_study.run(run_budget_study.BudgetStudyArguments(study=str(study_file), seeds="1", dry_run=True))
    plan = capsys.readouterr().out
    assert "seeds [1] (reported: [0, 1])" in plan and "seed1" in plan and "seed0" not in plan
    run_budget_study.run(run_budget_study.BudgetStudyArguments(study=str(study_file), seeds="1", probe_examples=8))
    rows = json.loads((tmp_path / "run/budget_study.json").read_text())
    assert sorted((row["arm"], row["seed"]) for row in rows) == [("scratch", 0), ("scratch", 1), ("spt", 0),
                                                                  ("spt", 1)]
    probes = json.loads((tmp_path / "run/budget_study_checkpoints.json").read_text())
    assert sorted(probe["seed"] for probe in probes) == [0, 1]
    assert seed0.read_text() == first  # seed 0 was not trained again
    assert json.loads((tmp_path / "run/grid.json").read_text())["seeds"] == [0, 1]


def test_configs_trains_the_named_configurations_and_reports_every_finished_one(tmp_path, capsys):
    """`--configs n` trains configuration n only (a study of several, run one configuration a launch) and the
    report holds every configuration the folder has finished; an unknown name is refused with the study's."""
    torch.set_num_threads(1)
    study_file = tmp_path / "study.yaml"
    arms = [arm for arm in STUDY["arms"] if arm["name"] in ("scratch", "spt_e1")]
    tasks = {"m": STUDY["tasks"]["m"], "n": {**STUDY["tasks"]["m"], "task_options": {
        **STUDY["tasks"]["m"]["task_options"], "length": LENGTH - 2}}}
    study_file.write_text(yaml.safe_dump({**STUDY, "arms": arms, "tasks": tasks, "output_dir": str(tmp_path / "run")}))
    with pytest.raises(UserInputError, match="--configs x: the study has no such configuration \\(it has m, n\\)"):
        run_budget_study.run(run_budget_study.BudgetStudyArguments(study=str(study_file), configs="x"))
    with pytest.raises(UserInputError, match="--configs sets what a study trains, and --combine trains nothing"):
        run_budget_study.BudgetStudyArguments(combine="a", configs="m", output_dir=str(tmp_path))
    capsys.readouterr()
    run_budget_study.run(run_budget_study.BudgetStudyArguments(study=str(study_file), configs="n", dry_run=True))
    plan = capsys.readouterr().out
    assert "cells/n/" in plan and "cells/m/" not in plan and "pretrain/n_" in plan and "pretrain/m_" not in plan
    run_budget_study.run(run_budget_study.BudgetStudyArguments(study=str(study_file), configs="n", probe_examples=8))
    rows = json.loads((tmp_path / "run/budget_study.json").read_text())
    assert sorted((row["config"], row["arm"]) for row in rows) == [("n", "scratch"), ("n", "spt")]
    assert not (tmp_path / "run/cells/m").exists()
    first = (tmp_path / "run/cells/n/scratch/seed0/phase.json").read_text()
    run_budget_study.run(run_budget_study.BudgetStudyArguments(study=str(study_file), configs="m", probe_examples=8))
    rows = json.loads((tmp_path / "run/budget_study.json").read_text())
    assert sorted((row["config"], row["arm"]) for row in rows) == [("m", "scratch"), ("m", "spt"), ("n", "scratch"),
                                                                    ("n", "spt")]
    assert (tmp_path / "run/cells/n/scratch/seed0/phase.json").read_text() == first  # not trained again


def test_arm_model_settings_and_budget_controls_are_checked():
    assert not Arm("cm", compute_matched=True, pretrain_epochs=5).pretrain  # a budget for the control, not SPT
    assert Arm("spt_e5", pretrain_epochs=5).pretrain
    with pytest.raises(UserInputError, match="scratch arms"):
        Arm("spt_alibi", pretrain=True, model={"position_embedding_type": "alibi"})
    with pytest.raises(UserInputError, match="num_layers"):
        Arm("deep", model={"num_hidden_layers": 3})
    with pytest.raises(UserInputError, match="position_embeding_type"):
        parse_grid({**STUDY, "arms": [{"name": "x", "model": {"position_embeding_type": "alibi"}}]})


def test_summary_pairs_each_budget_with_its_controls():
    rows = [{"config": "c", "arm": arm, "budget_tokens": tokens, "pretrain_epochs": epochs, "test_accuracy": acc}
            for arm, tokens, epochs, acc in [("scratch", 0, None, 0.5), ("scratch_alibi", 0, None, 0.7),
                                             ("spt", 100, 1, 0.6), ("scratch_compute_matched", 100, 1, 0.55),
                                             ("spt", 1000, 10, 0.9), ("scratch_compute_matched", 1000, 10, 0.5)]]
    summary = summarize_study(rows)["c"]
    assert [b["budget_tokens"] for b in summary["budgets"]] == [100, 1000]
    assert summary["budgets"][1]["gain_vs_scratch"] == pytest.approx(0.4)
    assert summary["budgets"][1]["gain_vs_compute_matched"] == pytest.approx(0.4)
    assert summary["budgets"][0]["gain_vs_compute_matched"] == pytest.approx(0.05)
    assert list(summary["controls"]) == ["scratch_alibi"]
    assert "| 10 | 1.00e+03 | 90.0 ± n/a (1) | 50.0 ± n/a (1) | +40.0 | +40.0 | n/a | n/a |" in study_markdown(
        {"c": summary}, [], NO_EVIDENCE)
    assert arm_kind("spt_e10", 10) == "spt" and arm_kind("spt_1_epochs", 1) == "spt_1_epochs"


# Studies that add budgets to another study's configuration: their plain scratch arm is that study's (the same
# cell: data, model, recipe and seed), so they do not train it again.
SCRATCH_FROM = {"digits32_budget": "digits32"}


@pytest.mark.parametrize("name", study_names())
def test_shipped_studies_parse_with_both_controls_per_budget(name):
    grid = study_grid(name, seeds=[0], output_dir="unused")
    budgets = {arm.pretrain_epochs for arm in grid.arms if arm.pretrain and arm.init_parts is None}
    matched = {arm.pretrain_epochs for arm in grid.arms if arm.compute_matched}
    assert budgets and budgets <= matched
    if name not in SCRATCH_FROM:
        assert any(arm.name == "scratch" for arm in grid.arms)
        return
    other = study_grid(SCRATCH_FROM[name], seeds=[0], output_dir="unused")
    assert not any(arm.name == "scratch" for arm in grid.arms)
    for mine, theirs in ((grid.model, other.model), (grid.experiment, other.experiment),
                         (list(grid.tasks.values()), list(other.tasks.values()))):
        assert mine == theirs


def test_unknown_study_names_the_shipped_ones():
    with pytest.raises(UserInputError, match="pathfinder_budget"):
        study_grid("no_such_study")


def _report_folder(folder: Path, config: str, accuracy: float) -> Path:
    """A finished study's report files holding one configuration: scratch, and SPT beside compute-matched scratch."""
    folder.mkdir(parents=True)
    base = {"task": "pathfinder", "config": config, "seed": 0, "eval_accuracy": accuracy, "num_layers": 2}
    rows = [{**base, "arm": "scratch", "arm_name": "scratch", "test_accuracy": 0.5, "pretrain_epochs": None,
             "pretrain_tokens": 0, "budget_tokens": 0},
            {**base, "arm": "spt", "arm_name": "spt_e4", "test_accuracy": accuracy, "pretrain_epochs": 4.0,
             "pretrain_tokens": 1000, "budget_tokens": 1000},
            {**base, "arm": "scratch_compute_matched", "arm_name": "scratch_compute_matched_e4", "test_accuracy": 0.5,
             "pretrain_epochs": 4.0, "pretrain_tokens": 0, "budget_tokens": 1000}]
    probes = [{"config": config, "seed": 0, "pretrain_epochs": 4.0, "num_layers": 2, "pretrain_tokens": 1000,
               "mlm_loss": 0.1, "unigram_loss": 0.2, "near_ratio_by_layer": [1.0, 2.0]}]
    (folder / "budget_study.json").write_text(json.dumps(rows))
    (folder / "budget_study_checkpoints.json").write_text(json.dumps(probes))
    return folder


def test_combine_writes_one_report_over_studies_and_refuses_a_configuration_from_two(tmp_path, capsys):
    first = _report_folder(tmp_path / "first", "easy", 0.9)
    second = _report_folder(tmp_path / "second", "hard", 0.6)
    out = tmp_path / "combined"
    run_budget_study.run(run_budget_study.BudgetStudyArguments(combine=f"{first},{second}", output_dir=str(out)))
    rows = json.loads((out / "budget_study.json").read_text())
    assert [row["config"] for row in rows] == ["easy"] * 3 + ["hard"] * 3
    markdown = (out / "budget_study.md").read_text()
    assert "## easy" in markdown and "## hard" in markdown and "+40.0" in markdown and "+10.0" in markdown
    assert (out / "budget_study.png").is_file()
    again = _report_folder(tmp_path / "rerun", "easy", 0.7)
    with pytest.raises(UserInputError, match="'easy' is in both .* neither holds every run of the other"):
        run_budget_study.run(run_budget_study.BudgetStudyArguments(combine=f"{first},{again}", output_dir=str(out)))
    with pytest.raises(UserInputError, match="no finished budget study"):
        run_budget_study.run(run_budget_study.BudgetStudyArguments(combine=str(tmp_path), output_dir=str(out)))
    with pytest.raises(UserInputError, match="--output_dir"):
        run_budget_study.run(run_budget_study.BudgetStudyArguments(combine=str(first)))


def test_replace_configs_takes_a_re_run_configuration_whole_from_the_last_folder(tmp_path):
    """A study re-run under newer code (other numbers under the same configuration name) is refused unless named in
    --replace_configs; then its rows and probes replace the earlier folder's, and other configurations stay."""
    report = _report_folder(tmp_path / "report", "easy", 0.9)
    other = _report_folder(tmp_path / "other", "hard", 0.6)
    rerun = _report_folder(tmp_path / "rerun", "easy", 0.7)
    out = tmp_path / "combined"
    with pytest.raises(UserInputError, match="--replace_configs"):
        run_budget_study.run(run_budget_study.BudgetStudyArguments(combine=f"{report},{other},{rerun}",
                                                                    output_dir=str(out)))
    run_budget_study.run(run_budget_study.BudgetStudyArguments(combine=f"{report},{other},{rerun}",
                                                                replace_configs="easy", output_dir=str(out)))
    rows = json.loads((out / "budget_study.json").read_text())
    assert sorted((row["config"], row["test_accuracy"]) for row in rows if row["arm"] == "spt") == [("easy", 0.7),
                                                                                                 ("hard", 0.6)]
    assert len(rows) == 6 and len(json.loads((out / "budget_study_checkpoints.json").read_text())) == 2
    with pytest.raises(UserInputError, match="--replace_configs esay: no folder holds"):
        run_budget_study.run(run_budget_study.BudgetStudyArguments(combine=f"{report},{rerun}", replace_configs="esay",
                                                                    output_dir=str(out)))
    with pytest.raises(UserInputError, match="give --combine too"):
        run_budget_study.BudgetStudyArguments(study="digits32", replace_configs="easy")


def test_combine_takes_a_configuration_from_the_study_re_run_with_more_seeds(tmp_path):
    """A report holding seed 0 of a configuration and the study's folder re-run with seeds 0 and 1: the folder
    holds every row and probe of the report, so its rows replace them (in either order); one changed row refuses."""
    report = _report_folder(tmp_path / "report", "easy", 0.9)
    rerun = _report_folder(tmp_path / "rerun", "easy", 0.9)
    for name in ("budget_study.json", "budget_study_checkpoints.json"):
        entries = json.loads((rerun / name).read_text())
        (rerun / name).write_text(json.dumps(entries + [{**entry, "seed": 1} for entry in entries]))
    other = _report_folder(tmp_path / "other", "hard", 0.6)
    for order in ([report, other, rerun], [rerun, report, other]):
        rows, probes = combined_reports(order)
        assert sorted((row["config"], row["seed"]) for row in rows) == [("easy", 0)] * 3 + [("easy", 1)] * 3 + [
            ("hard", 0)] * 3
        assert sorted(probe["seed"] for probe in probes if probe["config"] == "easy") == [0, 1]
    changed = json.loads((rerun / "budget_study.json").read_text())
    changed[0]["test_accuracy"] = 0.25
    (rerun / "budget_study.json").write_text(json.dumps(changed))
    with pytest.raises(UserInputError, match="neither holds every run"):
        combined_reports([report, rerun])


def test_checkpoints_of_two_depths_are_reported_apart():
    """A 1-layer and a 2-layer SPT checkpoint at one budget keep their own losses and per-layer ratios."""
    probes = [{"config": "c", "seed": 0, "pretrain_epochs": 4.0, "num_layers": depth, "pretrain_tokens": 1000,
               "mlm_loss": loss, "unigram_loss": 0.2, "near_ratio_by_layer": ratios}
              for depth, loss, ratios in ((2, 0.1, [1.5, 2.5]), (1, 0.3, [0.5]))]
    summary = {"c": {"scratch": None, "controls": {}, "budgets": [
        {"budget_tokens": 1000, "pretrain_epochs": 4.0, "spt": {"mean": 0.6, "std": 0.0, "n": 1},
         "gain_vs_scratch": None, "gain_vs_compute_matched": None}]}}
    markdown = study_markdown(summary, probes, NO_EVIDENCE)
    assert "2 layers: 0.100 / 0.200; 1 layer: 0.300 / 0.200" in markdown
    assert "2 layers: 1.50, 2.50; 1 layer: 0.50" in markdown


def test_a_study_without_spt_budget_writes_its_table_without_the_figure(tmp_path):
    """Scratch-only arms (e.g. a model-selection check) have no gain to plot against tokens: table, no figure."""
    from hf_spt.reports.budget_report import write_study_report
    rows = [{"task": "pathfinder", "config": "c", "arm": "scratch", "arm_name": "scratch", "seed": 0,
             "test_accuracy": 0.55, "eval_accuracy": 0.5, "pretrain_epochs": None, "pretrain_tokens": 0,
             "budget_tokens": 0, "num_layers": 1}]
    write_study_report(rows, [], {}, tmp_path)
    assert "| scratch | 55.0 ± n/a (1) |" in (tmp_path / "budget_study.md").read_text()
    assert not (tmp_path / "budget_study.png").exists()


def test_add_seeds_joins_other_seeds_of_a_configuration_run_into_another_folder(tmp_path):
    """Seed 0 in the report and seed 1 run into another folder (the first folder lost): refused as two runs of one
    configuration unless named in --add_seeds; then joined, rows, probes and compute curves. A seed in both folders,
    or other settings under the name, is refused even then."""
    from hf_spt.analysis.compute import ComputeCurve

    report = _report_folder(tmp_path / "report", "easy", 0.9)
    later = _report_folder(tmp_path / "later", "easy", 0.7)
    for name in ("budget_study.json", "budget_study_checkpoints.json"):
        entries = json.loads((later / name).read_text())
        (later / name).write_text(json.dumps([{**entry, "seed": 1, "seconds": 5.0} for entry in entries]))
    for folder, seed, accuracy in ((report, 0, 0.6), (later, 1, 0.8)):
        curves = [ComputeCurve("easy", arm, seed, flops, 10.0, [(1.0, accuracy)], accuracy).to_dict()
                  for arm, flops in (("scratch", 0.0), ("spt_e4", 40.0))]
        (folder / "budget_study_compute.json").write_text(json.dumps(curves))
    out = tmp_path / "combined"
    with pytest.raises(UserInputError, match="--add_seeds to join them"):
        run_budget_study.run(run_budget_study.BudgetStudyArguments(combine=f"{report},{later}", output_dir=str(out)))
    run_budget_study.run(run_budget_study.BudgetStudyArguments(combine=f"{report},{later}", add_seeds="easy",
                                                                output_dir=str(out)))
    rows = json.loads((out / "budget_study.json").read_text())
    assert sorted((row["arm"], row["seed"]) for row in rows) == sorted(
        (arm, seed) for arm in ("scratch", "spt", "scratch_compute_matched") for seed in (0, 1))
    assert sorted(probe["seed"] for probe in json.loads((out / "budget_study_checkpoints.json").read_text())) == [0, 1]
    assert sorted((curve["arm"], curve["seed"]) for curve in json.loads(
        (out / "budget_study_compute.json").read_text())) == [("scratch", 0), ("scratch", 1), ("spt_e4", 0),
                                                              ("spt_e4", 1)]
    assert "80.0 ± 14.1 (2)" in (out / "budget_study.md").read_text()  # SPT's test mean over the joined seeds
    with pytest.raises(UserInputError, match="seed 0 of 'easy' is in both"):
        combined_reports([report, later, _report_folder(tmp_path / "again", "easy", 0.5)], added=["easy"])
    changed = json.loads((later / "budget_study.json").read_text())
    changed[1]["pretrain_tokens"] = 2000
    (later / "budget_study.json").write_text(json.dumps(changed))
    with pytest.raises(UserInputError, match="ran different settings under 'easy'.*pretrain_tokens"):
        combined_reports([report, later], added=["easy"])
    with pytest.raises(UserInputError, match="--add_seeds esay: no folder holds"):
        combined_reports([report, later], added=["esay"])
    with pytest.raises(UserInputError, match="name each configuration in one"):
        run_budget_study.BudgetStudyArguments(combine=f"{report},{later}", add_seeds="easy", replace_configs="easy")


def _paired_rows(configs: dict[str, float], budgets: tuple[int, ...] = (100,)) -> list[dict]:
    """Three seeds of SPT, scratch and compute-matched scratch per configuration ({config: SPT's gain}) and budget."""
    rows = []
    for config, gain in configs.items():
        for seed in (0, 1, 2):
            rows.append({"config": config, "arm": "scratch", "seed": seed, "test_accuracy": 0.5, "pretrain_tokens": 0,
                         "budget_tokens": 0, "num_layers": 1, "pretrain_epochs": None, "model": None})
            for tokens in budgets:
                for arm, score in (("spt", 0.5 + gain + 0.01 * seed), ("scratch_compute_matched", 0.5 - 0.01 * seed)):
                    rows.append({"config": config, "arm": arm, "seed": seed, "test_accuracy": score,
                                 "pretrain_tokens": tokens if arm == "spt" else 0, "budget_tokens": tokens,
                                 "num_layers": 1, "pretrain_epochs": tokens / 10, "model": None})
    return rows


def test_the_paired_figure_draws_the_digits_table_configurations_and_pools(tmp_path):
    """docs/lra.md's table of the digits results as panels: every length configuration (32x32 at both budgets
    included) with 8x8's pool over its budgets right after its rows, the labelled-data sizes with their study's pool;
    the length study's pool of 8x8 with 16x16, which the text never cites, is not drawn; nor is a configuration of
    no panel."""
    from hf_spt.reports.budget_report import PAIRED_PLOT_NAME, _panel_rows, paired_panels, write_study_report

    rows = [*_paired_rows({"digits8": 0.0, "digits16": 0.05}, budgets=(100, 400)),
            *_paired_rows({"digits32": -0.04, "digits32_e40": -0.04, "digits16_n600": 0.1, "digits16_n300": 0.1,
                           "digits16_n150": 0.05, "elsewhere": 0.2})]
    evidence = study_evidence(rows, {"digits_length": ["digits8", "digits16"],
                                     "digits_data_size": ["digits16_n150", "digits16_n300", "digits16_n600"]})
    panels = paired_panels(evidence)
    assert [list(panel.configs) for panel in panels] == [["digits8", "digits16", "digits32", "digits32_e40"],
                                                         ["digits16_n600", "digits16_n300", "digits16_n150"]]
    length = [(label, pooled, sorted(controls)) for label, pooled, controls in _panel_rows(panels[0], evidence)]
    assert [label for label, _, _ in length] == [
        "8x8\n10 SPT epochs", "8x8\n40 SPT epochs", "8x8, both budgets\npooled (seed means)", "16x16\n10 SPT epochs",
        "16x16\n40 SPT epochs", "32x32\n10 SPT epochs", "32x32\n10 SPT epochs"]
    assert length[2][1:] == (True, ["scratch", "scratch_compute_matched"])
    size = _panel_rows(panels[1], evidence)
    assert size[-1][0] == "150, 300, 600 pictures\npooled (seed means)" and size[-1][2]["scratch"].n == 3
    write_study_report(rows, [], {"digits_length": ["digits8", "digits16"],
                                  "digits_data_size": ["digits16_n150", "digits16_n300", "digits16_n600"]}, tmp_path)
    assert (tmp_path / PAIRED_PLOT_NAME).stat().st_size > 0
    assert (tmp_path / "budget_study.md").read_text().startswith("# Budget study\n\nPaired by seed: 28 paired "
                                                                  "intervals, ")


def test_the_paired_figure_draws_each_study_of_several_configurations(tmp_path):
    """`budget_study_paired.png` of a study of the user's: one panel per study that pools several configurations,
    none for a lone one."""
    from hf_spt.reports.budget_report import PAIRED_PLOT_NAME, paired_panels, write_study_report

    rows = []
    for config, gain in (("a", 0.05), ("b", 0.10), ("lone", 0.0)):
        for seed in (0, 1, 2):
            for arm, score, tokens in (("spt", 0.5 + gain + 0.01 * seed, 100), ("scratch", 0.5, 0),
                                       ("scratch_compute_matched", 0.5 - 0.01 * seed, 100)):
                rows.append({"config": config, "arm": arm, "seed": seed, "test_accuracy": score,
                             "pretrain_tokens": tokens if arm == "spt" else 0, "budget_tokens": tokens,
                             "num_layers": 1, "pretrain_epochs": 1.0 if tokens else None, "model": None})
    studies = {"two_configs": ["a", "b"], "one_config": ["lone"]}
    evidence = study_evidence(rows, studies)
    write_study_report(rows, [], studies, tmp_path)
    assert {entry["scope"] for entry in evidence["pooled"] if len(entry["configs"]) > 1} == {"two_configs"}
    # a configuration's label: the title its study file gives it (passed in), else its code name
    assert [panel.configs for panel in paired_panels(evidence, {"a": "config A"})] == [{"a": "config A", "b": "b"}]
    assert (tmp_path / PAIRED_PLOT_NAME).stat().st_size > 0


def test_the_paired_figure_draws_the_whole_budget_contrast_its_columns_name(tmp_path, monkeypatch):
    """Issue 54: `budget_study_paired.png` from the committed rows. A column named for scratch given SPT's whole
    budget draws SPT minus that control (the README's +15.4 at 300 pictures) beside plain and patient scratch, in
    the whole-budget arm's colour, and the legend names it; every mean drawn is a paired row of the report."""
    from contextlib import contextmanager

    from matplotlib.colors import to_hex

    from hf_spt.experiments.suites.budget_study import shipped_study_configs, shipped_study_titles
    from hf_spt.reports import budget_report
    from hf_spt.reports.arm_labels import ARM_COLOURS

    figures = []
    original = budget_report.saved_figure

    @contextmanager
    def kept(path, **options):  # noqa: ANN001, ANN202 - the report's own figure, kept for reading after it is saved
        with original(path, **options) as (figure, axes):
            figures.append(figure)
            yield figure, axes

    monkeypatch.setattr(budget_report, "saved_figure", kept)
    rows = json.loads((Path(__file__).resolve().parent.parent / "docs/lra/budget_study.json").read_text())
    evidence = study_evidence(rows, shipped_study_configs())
    budget_report.plot_paired(evidence, tmp_path / "paired.png", shipped_study_titles())
    colour = {to_hex(value): arm for arm, value in ARM_COLOURS.items()}
    drawn: dict[str, dict[str, float]] = {}  # {column label: {control: mean drawn}}
    for axis in figures[0].axes:
        labels = [label.get_text().replace("\n", " ") for label in axis.get_xticklabels()]
        for container in axis.containers:
            line = container.lines[0]
            column = labels[round(float(line.get_xdata()[0]))]
            drawn.setdefault(column, {})[colour[to_hex(line.get_color())]] = float(line.get_ydata()[0])
    whole = {column: means for column, means in drawn.items() if "whole budget" in column and "pooled" not in column}
    assert len(whole) == 2
    for column, means in whole.items():
        assert sorted(means) == ["scratch", "scratch_compute_matched", "scratch_compute_matched_full"], column
    n300 = next(means for column, means in whole.items() if "300 pictures" in column)
    paired = next(c["difference"] for c in evidence["paired"] if c["config"] == "digits16_n300_whole_budget"
                  and c["control"] == "scratch_compute_matched_full")
    assert n300["scratch_compute_matched_full"] == pytest.approx(100 * paired.mean) == pytest.approx(15.42, abs=0.01)
    legend = [text.get_text().replace("\n", " ") for text in figures[0].axes[0].get_legend().get_texts()]
    assert "compute-matched scratch, whole budget" in legend
