"""Ablation grid: parsing, shared SPT checkpoints, resume after an interruption, report."""

from __future__ import annotations

import csv
import subprocess
import sys
import json
from pathlib import Path

import pytest
import torch

import hf_spt.experiments.suites.grid_runner as grid_runner
from conftest import CellRecorder
from hf_spt.experiments.suites.grid_runner import run_grid
from hf_spt.experiments.suites.unit_claims import CLAIMS_DIR, UnitClaims, claim_name
from hf_spt.experiments.suites.grid import PretrainJob, cells, load_grid, parse_grid, pretrain_job
from hf_spt.reports.grid_report import gain_recovered
from hf_spt.reports.seed_tables import summarize
from hf_spt.runs.folder import PHASE_RESULT_NAME

DEFAULT_GRID = Path(__file__).parent.parent / "hf_spt" / "scripts" / "ablation_default.yaml"


def tiny_grid(output_dir: Path, arms: list[dict]) -> dict:
    return {"output_dir": str(output_dir), "seeds": [0, 1],
            "tasks": {"m": {"task": "markov", "task_options": {"num_train": 32, "num_validation": 16,
                                                                "num_test": 16, "length": 12}}},
            "experiment": {"pretrain_epochs": 1, "finetune_epochs": 1, "report_to": "none"},
            "model": {"num_hidden_layers": 1, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 16},
            "arms": arms}


ARMS = [{"name": "scratch"}, {"name": "spt", "pretrain": True}, {"name": "hybrid_qk", "init_parts": "qk"},
        {"name": "frozen", "freeze_parts": "attention"}]


def test_interrupted_grid_resumes_without_redoing_finished_cells(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    grid = parse_grid(tiny_grid(tmp_path, ARMS))
    cells_run = CellRecorder(monkeypatch)
    cells_run.kill_after(3)
    with pytest.raises(KeyboardInterrupt):
        run_grid(grid)
    pretrain_folders = sorted((tmp_path / "pretrain").iterdir())
    assert [p.name for p in pretrain_folders] == ["m_e1_L1_s0", "m_e1_L1_s1"]  # one per seed, shared by 2 arms
    stamps = {p: (p / "phase.json").stat().st_mtime_ns for p in pretrain_folders}

    cells_run.record_rerun()
    rows = run_grid(grid)
    assert set(cells_run.rerun) == {cell.folder(grid) for cell in cells(grid)} - set(cells_run.done)
    assert len(cells_run.rerun) == 5
    assert not cells_run.pretrained and all((p / "phase.json").stat().st_mtime_ns == t for p, t in stamps.items())
    assert len(rows) == 8
    with open(tmp_path / "results.csv") as handle:
        assert len(list(csv.DictReader(handle))) == 8
    assert "| hybrid_qk |" in (tmp_path / "results.md").read_text()
    assert (tmp_path / "results.png").stat().st_size > 0


def test_arms_map_to_shared_checkpoints(tmp_path):
    grid = parse_grid(tiny_grid(tmp_path, ARMS + [
        {"name": "short", "pretrain_epochs": 3}, {"name": "deep", "pretrain": True, "num_layers": 4},
        {"name": "cross", "pretrain_task": "other"}, {"name": "matched", "compute_matched": True}])
        | {"pretrain_tasks": {"other": {"task": "markov", "task_options": {"steps": [2, 5]}}}})
    jobs = {cell.arm: pretrain_job(grid, cell) for cell in cells(grid) if cell.seed == 1}
    assert jobs["scratch"] is None and jobs["frozen"] is None and jobs["matched"] is None
    assert jobs["spt"] == jobs["hybrid_qk"] == PretrainJob("m", 1.0, 1, 1)
    assert jobs["short"] == PretrainJob("m", 3.0, 1, 1)
    assert jobs["deep"] == PretrainJob("m", 1.0, 4, 1)
    assert jobs["cross"] == PretrainJob("other", 1.0, 1, 1)


@pytest.mark.parametrize("arm, message", [
    ({"name": "x", "init_parts": "qk,attn"}, "valid parts"),
    ({"name": "x", "lr": 1}, "unknown setting"),
    ({"name": "x", "pretrain_task": "nowhere"}, "not in tasks or pretrain_tasks"),
    ({"name": "x", "compute_matched": True, "pretrain": True}, "scratch control"),
    ({"name": "x", "pretrain": True, "start": "random"}, "only for an arm that does not pretrain"),
    ({"name": "x", "method": "adapters"}, "method is one of full, lora"),
    ({"name": "x", "start": "random"}, "give the pretrained model with --model_name_or_path"),
    ({"name": "x", "tasks": ["nowhere"]}, r"runs on tasks \['nowhere'\], which are not in tasks"),
    ({"name": "x", "tasks": []}, "leave it out to run on every task"),
])
def test_bad_grids_give_clear_errors(tmp_path, arm, message):
    with pytest.raises(ValueError, match=message):
        grid_runner.plan_grid(parse_grid(tiny_grid(tmp_path, [arm])))


def test_an_arm_runs_on_the_tasks_it_names(tmp_path):
    """An arm's `tasks:` keeps its cells (and the SPT checkpoints they need) to those task keys: a permuted twin of a
    configuration gets its SPT arm and two controls, not every mechanism arm."""
    grid = parse_grid(tiny_grid(tmp_path, [{"name": "scratch"}, {"name": "spt", "pretrain": True},
                                           {"name": "hybrid_qk", "init_parts": "qk", "tasks": ["m"]}])
                      | {"tasks": {key: {"task": "markov", "task_options": {"num_train": 32, "num_validation": 16,
                                                                               "num_test": 16, "length": 12}}
                                   for key in ("m", "twin")}})
    held = {(cell.task, cell.arm) for cell in cells(grid)}
    assert held == {("m", "scratch"), ("m", "spt"), ("m", "hybrid_qk"), ("twin", "scratch"), ("twin", "spt")}
    assert len(cells(grid)) == 2 * len(held)


def test_a_grid_arm_is_a_modes_arm_lora_included(tmp_path):
    """Grid arms are `arms.Arm`s, as run_spt.py's modes are: `method: lora` fine-tunes adapters on the SPT
    checkpoint, beside the same arm in full."""
    torch.set_num_threads(1)
    grid = parse_grid({**tiny_grid(tmp_path, [{"name": "spt_lora", "pretrain": True, "method": "lora"},
                                              {"name": "spt", "pretrain": True}]), "seeds": [0]})
    run_grid(grid)
    lora, full = (json.loads((cell.folder(grid) / "phase.json").read_text()) for cell in cells(grid))
    assert lora["finetune_method"] == "lora" and full["finetune_method"] == "full"
    assert lora["init_from"] == full["init_from"] and lora["trainable_parameters"] < full["trainable_parameters"]


def test_default_grid_holds_the_papers_arms():
    grid = load_grid(DEFAULT_GRID)
    names = {arm.name for arm in grid.arms}
    assert {"scratch", "scratch_compute_matched", "spt", "scratch_frozen_attention", "hybrid_qk", "hybrid_attention",
            "hybrid_mlp", "spt_cross_task", "spt_1_epochs", "spt_10_epochs", "spt_50_epochs", "spt_4_layers"} <= names
    assert grid.seeds == [0, 1, 2] and grid.model["num_hidden_layers"] == 1


def test_gain_recovered_is_relative_to_scratch_and_spt():
    rows = [{"task": "t", "arm": arm, "seed": s, "test_accuracy": acc}
            for arm, accs in {"scratch": [0.5, 0.6], "spt": [0.9, 0.9], "hybrid_qk": [0.8, 0.8]}.items()
            for s, acc in enumerate(accs)]
    summary = summarize(rows)["t"]
    assert summary["scratch"]["mean"] == pytest.approx(0.55)
    assert gain_recovered(summary, "hybrid_qk") == pytest.approx(0.25 / 0.35)
    assert gain_recovered(summary, "scratch") == pytest.approx(0.0)


def _rank(index: int, ran: list):
    """accelerate's PartialState as rank `index` of two sees it (its barrier recorded in `ran`)."""

    class Rank:
        process_index, num_processes, local_process_index, is_main_process = index, 2, index, index == 0
        device = torch.device("cpu")

        def __init__(self, *args, **kwargs):
            pass

        def wait_for_everyone(self):
            ran.append("barrier")

    return Rank


def test_ranks_share_one_queue_longest_pretraining_first_then_the_cells_that_need_a_checkpoint(tmp_path,
                                                                                                 monkeypatch):
    """The units in order SPT jobs (longest first), scratch cells (compute-matched first), cells that start from a
    checkpoint; a rank runs each unit no other rank has claimed, a cell that needs a checkpoint waits for its own
    job only, and the ranks meet after clearing old claims and at the end."""
    grid = parse_grid({**tiny_grid(tmp_path, [{"name": "scratch"}, {"name": "spt_e1", "pretrain_epochs": 1},
                                              {"name": "spt_e3", "pretrain_epochs": 3},
                                              {"name": "scratch_cm", "compute_matched": True}]), "seeds": [0]})
    e1, e3 = PretrainJob("m", 1.0, 1, 0), PretrainJob("m", 3.0, 1, 0)
    scratch, spt_e1, spt_e3, scratch_cm = cells(grid)
    claims = Path(grid.output_dir) / CLAIMS_DIR
    claims.mkdir(parents=True)
    (claims / claim_name(Path("pretrain/m_e3_L1_s0"))).write_text("rank 0\n")  # the other rank took the longest job
    ran: list = []
    monkeypatch.setattr(grid_runner, "PartialState", _rank(1, ran))
    monkeypatch.setattr(grid_runner, "_run_in_child", lambda grid, kind, unit, *args: ran.append(unit))
    monkeypatch.setattr(grid_runner, "wait_for_checkpoint", lambda grid, job: ran.append(("wait", job)))
    run_grid(grid)
    assert ran == ["barrier", e1, scratch_cm, scratch, ("wait", e1), spt_e1, ("wait", e3), spt_e3, "barrier"]
    assert len(list(claims.iterdir())) == 6  # this rank's five and the other's (the main process clears them)

    ran.clear()  # a new launch: the main process clears the claims a killed launch left, then every unit is free
    monkeypatch.setattr(grid_runner, "PartialState", _rank(0, ran))
    run_grid(grid)
    assert ran == ["barrier", e3, e1, scratch_cm, scratch, ("wait", e1), spt_e1, ("wait", e3), spt_e3, "barrier"]
    assert not claims.exists()


def test_units_whose_folders_joined_with_underscores_would_match_claim_one_each(tmp_path):
    """Issue 66: claims named by the folder's parts joined with '__' made `cells/a__b/c` and `cells/a/b__c` one claim,
    so the second unit was never trained; each folder now has its own claim."""
    claims = UnitClaims(tmp_path, _rank(0, [])())
    assert claims.claim(tmp_path / "cells" / "a__b" / "c") and claims.claim(tmp_path / "cells" / "a" / "b__c")
    assert not claims.claim(tmp_path / "cells" / "a" / "b__c")  # claimed once
    assert len(list(claims.folder.iterdir())) == 2


def test_a_cell_waits_until_its_checkpoint_has_its_result_file(tmp_path, monkeypatch):
    """Another rank trains the checkpoint: the waiting rank polls for the job's `phase.json`, written last."""
    grid = parse_grid({**tiny_grid(tmp_path, [{"name": "spt_e1", "pretrain_epochs": 1}]), "seeds": [0]})
    job = pretrain_job(grid, cells(grid)[0])
    result = job.folder(grid) / PHASE_RESULT_NAME
    polls: list = []

    def another_rank_finishes(seconds):
        polls.append(seconds)
        if len(polls) == 2:
            result.parent.mkdir(parents=True)
            result.write_text("{}")

    monkeypatch.setattr(grid_runner.time, "sleep", another_rank_finishes)
    grid_runner.wait_for_checkpoint(grid, job)
    assert polls == [grid_runner.CHECKPOINT_POLL_SECONDS] * 2


def test_a_narrower_rerun_trains_its_arms_and_keeps_every_finished_row(tmp_path, monkeypatch):
    import yaml

    from hf_spt.scripts import run_ablation

    torch.set_num_threads(1)
    grid_file = tmp_path / "grid.yaml"
    grid_file.write_text(yaml.safe_dump({**tiny_grid(tmp_path / "run", ARMS[:2]), "seeds": [0]}))
    run_ablation.run(run_ablation.AblationArguments(grid_file=str(grid_file)))
    cells_run = CellRecorder(monkeypatch)
    cells_run.record_rerun()
    run_ablation.run(run_ablation.AblationArguments(grid_file=str(grid_file), arms="scratch", seeds="1"))
    assert [folder.parts[-2:] for folder in cells_run.rerun] == [("scratch", "seed1")]  # only what was asked
    with open(tmp_path / "run/results.csv") as handle:
        rows = {(row["arm"], row["seed"]) for row in csv.DictReader(handle)}
    assert rows == {("scratch", "0"), ("spt", "0"), ("scratch", "1")}
    recorded = json.loads((tmp_path / "run/grid.json").read_text())
    assert [arm["name"] for arm in recorded["arms"]] == ["scratch", "spt"] and recorded["seeds"] == [0, 1]


def test_reading_a_grid_leaves_the_distributed_state_to_the_grid_runner():
    """Parsing checks every setting but the Trainer arguments, whose building would set up this process's
    distributed state with default settings: the grid runner sets it up itself (CPU ranks, a week's timeout at its
    barriers) and only then checks them (`check_trainer_settings_of`), so a long pretraining on one rank cannot
    time the others out."""
    code = ("from accelerate.state import PartialState\n"
            "from hf_spt.experiments.suites.grid import load_grid\n"
            f"load_grid({str(DEFAULT_GRID)!r})\n"
            "print(PartialState._shared_state == {})\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).parent.parent, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin",
                                                                  "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert done.stdout.strip().splitlines()[-1] == "True", done.stderr[-2000:]


def test_a_grid_task_without_its_task_name_is_one_line(tmp_path):
    """A task entry missing `task:` was a TypeError from the dataclass (a traceback), not a line naming the key."""
    from hf_spt.errors import UserInputError

    raw = tiny_grid(tmp_path, ARMS) | {"tasks": {"markov": {}}}
    with pytest.raises(UserInputError, match=r"tasks.markov: missing required setting 'task'"):
        parse_grid(raw)
