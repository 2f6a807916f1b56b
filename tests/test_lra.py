"""The LRA suite: data listing, the recipe per task, end to end on tiny released files with resume, the table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from hf_spt.errors import UserInputError
from hf_spt.experiments.step_plan import spt_step_budget
from hf_spt.experiments.suites.grid import parse_grid
from hf_spt.experiments.arguments import DataArguments, ExperimentArguments, ModelArguments, SharedTrainingArguments
from hf_spt.experiments.run_spec import resolve_run
from hf_spt.experiments.suites.lra import ARMS, LraSuite, lra_grid, run_lra_suite, runnable_tasks, step_counts
from hf_spt.reports.lra_report import PUBLISHED_SCRATCH, lra_table, markdown
from hf_spt.experiments.settings_files import recipe_settings
from hf_spt.tasks.lra_data import find_lra_data, missing_data_report
from conftest import CellRecorder
from task_files import write_aan, write_image_folder, write_imdb, write_listops, write_pathfinder_release

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.fixture
def lra_root(tmp_path) -> Path:
    """Every LRA task in its released layout, a few rows each."""
    root = tmp_path / "data"
    write_listops(root / "listops", rows_per_split=8)
    write_imdb(root / "aclImdb", reviews_per_class=5)  # a release name, not the first one
    write_aan(root / "retrieval", rows_per_split=6)
    write_image_folder(root / "image", per_class=5)
    write_pathfinder_release(root / "pathfinder", num_images=20)
    return root


def test_missing_data_is_listed_with_what_to_put_where(tmp_path):
    root = tmp_path / "data"
    write_aan(root / "retrieval")
    (root / "text").mkdir()  # an empty folder is not data
    found = find_lra_data(root)
    assert found["retrieval"] == root / "retrieval" and found["text"] is None
    report = missing_data_report(root, found)
    assert f"text: no data under {root / 'text'} (skipped)" in report
    assert f"{root / 'text'}/train/neg/*.txt" in report  # the loader's layout, DATA_DIR spelled out
    assert f"listops: no data under {root / 'listops'} (generated instead)" in report
    assert "retrieval" not in report
    suite = LraSuite(output_dir=str(tmp_path / "run"), data_root=str(root))
    assert runnable_tasks(suite)[1] == ["listops", "retrieval", "pathfinder"]


def test_folders_without_the_files_their_loader_reads_are_no_data(tmp_path, lra_root, capsys):
    from hf_spt.scripts import run_lra

    empty = tmp_path / "empty"
    for folder in ("text/train", "text/test", "image/train/cat", "image/test/cat",
                   "pathfinder/curv_contour_length_14/metadata", "pathfinder/curv_contour_length_14/imgs"):
        (empty / folder).mkdir(parents=True)
    (empty / "text" / "train" / "neg").mkdir()  # one class of one split is not the data either
    (empty / "text" / "train" / "neg" / "0_1.txt").write_text("dull")
    assert find_lra_data(empty, ("text", "image", "pathfinder")) == {"text": None, "image": None, "pathfinder": None}
    run_lra.run(run_lra.LraArguments(dry_run=True, data_root=str(empty)))
    out = capsys.readouterr().out  # before: text, image and pathfinder counted as data present
    for task in ("text", "image", "pathfinder"):
        assert f"{task}: no data under {empty / task}" in out
    assert all(folder is not None for folder in find_lra_data(lra_root).values())  # the released layouts count


def test_full_scale_runs_the_published_recipe_per_task(lra_root, tmp_path):
    grid = lra_grid(LraSuite(output_dir=str(tmp_path / "run"), data_root=str(lra_root)))
    assert list(grid.tasks) == ["listops", "text", "retrieval", "image", "pathfinder"]
    assert [arm.name for arm in grid.arms] == ["scratch", "scratch_compute_matched", "spt"]
    for name, spec in grid.tasks.items():
        recipe = recipe_settings("amos_lra", name)
        settings = {**spec.experiment, **spec.model, "max_length": spec.max_length}
        assert {k: settings[k] for k in recipe} == recipe
        assert spec.experiment["early_stopping_patience"] > 0 and spec.data_dir is not None
    assert grid.tasks["listops"].max_length == 2048 and grid.tasks["text"].data_dir == str(lra_root / "aclImdb")


def test_compute_matched_arm_gets_spt_steps():
    exp = ExperimentArguments(pretrain_epochs=2, finetune_epochs=3, pretrain_batch_size=10, finetune_batch_size=25)
    training = SharedTrainingArguments(output_dir="x")
    run = resolve_run(DataArguments(), ModelArguments(), exp, training)
    # a pair task pretrains on both sequences: 200 rows / 10 = 20 steps an epoch; fine-tuning 100 / 25 = 4
    assert spt_step_budget(100, True, 32, run.pretrain, run.finetune) == {"pretrain": 40, "finetune": 12,
                                                                         "finetune_steps_per_epoch": 4}
    counts = step_counts(lra_grid(LraSuite(output_dir="x", scale="mini", tasks=["markov"])))["markov"]
    assert counts["scratch_compute_matched"] == counts["spt"] == counts["pretrain"] + counts["finetune"]


def test_a_new_suite_arm_is_one_entry_of_arms(tmp_path, capsys, monkeypatch):
    """An arm added to `lra.ARMS` reaches the grid, the step counts, the dry run and the table, with no other edit."""
    from hf_spt.scripts import run_lra

    import hf_spt.experiments.suites.lra as lra

    monkeypatch.setattr(lra, "ARMS", (*ARMS, {"name": "spt_frozen", "pretrain": True, "freeze_parts": "attention"}))
    monkeypatch.setattr(run_lra, "ARMS", lra.ARMS)
    grid = lra_grid(LraSuite(output_dir=str(tmp_path), scale="mini", tasks=["markov"]))
    assert [arm.name for arm in grid.arms][-1] == "spt_frozen"
    counts = step_counts(grid)["markov"]
    assert counts["spt_frozen"] == counts["spt"] == counts["pretrain"] + counts["finetune"]
    run_lra.run(run_lra.LraArguments(dry_run=True, scale="mini", tasks="markov", output_dir=str(tmp_path)))
    assert "| scratch | scratch_compute_matched | spt | spt_frozen |" in capsys.readouterr().out
    rows = [{"task": "markov", "arm": "spt", "seed": 0, "test_accuracy": 0.9, "seconds": 1.0}]
    assert "| markov | – | – | 90.0 ± n/a (n=1) | – |" in markdown(lra_table(rows, [arm.name for arm in grid.arms]))


def test_suite_end_to_end_resumes_without_duplicate_rows(lra_root, tmp_path, monkeypatch):
    """Full-scale settings on the released layouts, a few steps per task with a tiny model; killed, then resumed."""
    torch.set_num_threads(1)
    tiny = {"num_hidden_layers": 1, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 16}
    suite = LraSuite(output_dir=str(tmp_path / "run"), data_root=str(lra_root), seeds=[0], pretrain_epochs=1,
                     finetune_epochs=1, model=tiny)
    grid = lra_grid(suite)
    cells_run = CellRecorder(monkeypatch)
    cells_run.kill_after(7)
    with pytest.raises(KeyboardInterrupt):
        run_lra_suite(grid)
    cells_run.record_rerun()
    rows = run_lra_suite(grid)
    assert len(cells_run.rerun) == 8 and not set(cells_run.rerun) & set(cells_run.done)
    assert sorted((r["task"], r["arm"]) for r in rows) == sorted({(r["task"], r["arm"]) for r in rows})
    saved = json.loads((tmp_path / "run" / "lra_results.json").read_text())
    assert len(saved["rows"]) == 15 and set(saved["tasks"]) == set(grid.tasks)
    spt = next(r for r in rows if r["arm"] == "spt")
    assert spt["pretrain_seconds"] > 0 and spt["seconds"] > spt["pretrain_seconds"]
    table = (tmp_path / "run" / "lra_results.md").read_text()
    assert "| average (5 LRA tasks) |" in table and "| 54.39 | n/a |" in table
    assert (tmp_path / "run" / "lra_results.png").stat().st_size > 0
    # SPT's learning curve per task and seed: one point per epoch (the best model's final re-evaluation dropped)
    assert {task: [epoch for epoch, _ in seeds["0"]] for task, seeds in saved["pretraining_curves"].items()} == {
        task: [1.0] for task in grid.tasks}
    assert "| first evaluation | best | epochs | seeds |" in table
    assert (tmp_path / "run" / "lra_pretraining.png").stat().st_size > 0


def test_table_means_published_column_and_average():
    rows = [{"task": task, "arm": arm, "seed": seed, "test_accuracy": accuracy, "seconds": 10.0 * (seed + 1)}
            for task, arms in {"listops": {"scratch": (0.3, 0.4), "spt": (0.5, 0.7)},
                               "markov": {"scratch": (0.5, 0.5), "spt": (1.0, 1.0)},
                               "image": {"scratch": (0.4, 0.4), "spt": (0.6, 0.6)}}.items()
            for arm, accuracies in arms.items() for seed, accuracy in enumerate(accuracies)]
    table = lra_table(rows, [arm["name"] for arm in ARMS])
    listops = table["tasks"]["listops"]
    assert listops["arms"]["scratch"]["mean"] == pytest.approx(35.0)
    assert listops["arms"]["spt"]["std"] == pytest.approx(14.142, abs=1e-3)
    assert listops["arms"]["spt"]["seconds"] == pytest.approx(15.0)
    assert listops["published_scratch"] == 36.37 and listops["published_spt"] is None
    assert table["average"]["tasks"] == ["listops", "image"]  # Markov is shown, never averaged
    assert table["average"]["arms"]["spt"] == pytest.approx(60.0)
    assert table["average"]["published_scratch"] == pytest.approx((36.37 + 42.44) / 2)
    text = markdown(table)
    assert "| listops | 35.0 ± 7.1 (n=2) | – | 60.0 ± 14.1 (n=2) | 36.37 | n/a |" in text
    assert "| markov | 50.0 ± 0.0 (n=2) | – | 100.0 ± 0.0 (n=2) | n/a | n/a |" in text
    assert "| average (2 LRA tasks) | 37.5 | – | 60.0 | 39.41 | n/a |" in text
    assert sum(PUBLISHED_SCRATCH.values()) / 5 == pytest.approx(54.39, abs=0.005)


def test_dry_run_and_bad_options(tmp_path, capsys):
    from hf_spt.scripts import run_lra

    run_lra.run(run_lra.LraArguments(dry_run=True, data_root=str(tmp_path), seeds="0,1"))
    out = capsys.readouterr().out
    assert "listops: generated" in out and "text: no data under" in out
    assert "| listops | 96000 | 600000 | 150000 | 150000 | 750000 | 750000 |" in out
    with pytest.raises(UserInputError, match="not in the full suite"):
        LraSuite(output_dir="x", tasks=["markov"])
    with pytest.raises(ValueError, match="unknown setting"):
        parse_grid({"tasks": {"t": {"task": "markov", "experiment": {"nope": 1}}}, "arms": [{"name": "a"}],
                    "seeds": [0]})


def test_gpu_self_check_explains_and_exits_without_a_gpu(monkeypatch, capsys):
    import gpu_self_check

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as stop:
        gpu_self_check.main(gpu_self_check.parse_arguments([]))
    assert stop.value.code == 2 and "needs a CUDA device" in capsys.readouterr().out


def test_gpu_self_check_selects_a_gpu_test_in_every_file_it_names():
    import gpu_self_check

    tests = Path(__file__).resolve().parent
    for name in gpu_self_check.GPU_TEST_FILES:
        assert "def test_on_a_gpu_" in (tests / name).read_text(), name


def test_early_stopping_ends_finetuning_within_the_epoch_budget(tmp_path):
    from hf_spt.experiments.model_config import build_config
    from hf_spt.experiments.phases import finetune_phase, run_phase
    from hf_spt.experiments.pipeline import prepare_task

    torch.set_num_threads(1)
    run = resolve_run(DataArguments(task="markov", task_options={"num_train": 32, "num_validation": 16,
                                                                 "num_test": 16, "length": 12}),
                      ModelArguments(hidden_size=16, num_attention_heads=2, intermediate_size=16),
                      ExperimentArguments(finetune_epochs=40, early_stopping_patience=1),
                      SharedTrainingArguments(output_dir=str(tmp_path), report_to="none"))
    task = prepare_task(run.task, 0)
    config = build_config(task, run.model)
    result = run_phase(finetune_phase(task, config, run.finetune, tmp_path / "scratch", "scratch"))
    assert result["epochs"] < 40 and result["steps"] == result["epochs"]  # one step an epoch: 32 rows, batch 32


def test_the_plan_names_what_will_be_read_and_a_release_one_level_down(lra_root, tmp_path, capsys):
    import shutil

    from hf_spt.scripts import run_lra

    run_lra.run(run_lra.LraArguments(dry_run=True, scale="mini", data_root=str(lra_root), seeds="0"))
    out = capsys.readouterr().out
    assert "listops: generated" in out and "pathfinder: generated" in out  # the mini suite generates them
    assert str(lra_root / "listops") not in out.split("Optimizer steps")[0]
    nested = tmp_path / "nested"
    shutil.copytree(lra_root, nested / "lra_release")  # unpacked into a folder of its own name
    report = missing_data_report(nested, find_lra_data(nested))
    assert f"Found it one level down, in {nested / 'lra_release' / 'listops'}" in report
    assert f"pass --data_root {nested / 'lra_release'}" in report


def test_a_truncated_parquet_file_is_named_not_a_traceback(tmp_path):
    import pandas as pd

    from hf_spt.tasks import load_task
    from hf_spt.tasks.common import DataFormatError

    path = tmp_path / "train.parquet"
    pd.DataFrame({"text": ["a b", "c d"] * 10, "label": [0, 1] * 10}).to_parquet(path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(DataFormatError, match=f"Could not read {path}"):
        load_task("custom", train_file=str(path), cache_dir=str(tmp_path / "cache"))
