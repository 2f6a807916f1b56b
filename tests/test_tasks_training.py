"""A short SPT + fine-tune run per task on tiny files, cross-task SPT, and a user's CSV through run_spt.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard
from task_files import (SHORT_LISTOPS, write_aan, write_custom_csv, write_image_folder, write_imdb, write_listops,
                        write_pathfinder_release)

from hf_spt.experiments.arguments import DataArguments, ExperimentArguments, ModelArguments, SharedTrainingArguments
from hf_spt.experiments.model_config import build_config
from hf_spt.experiments.phases import finetune_phase, pretrain_phase, run_phase
from hf_spt.experiments.pipeline import prepare_pretrain_task, prepare_task, run_experiment
from hf_spt.experiments.run_spec import resolve_run, task_requests
from hf_spt.scripts import run_spt

TINY_MODEL = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)


def tiny_experiment(output_dir: Path, **overrides) -> tuple[ExperimentArguments, SharedTrainingArguments]:
    settings = dict(pretrain_epochs=1, finetune_epochs=1, **overrides)
    training = SharedTrainingArguments(output_dir=str(output_dir), per_device_train_batch_size=8, report_to="none",
                                       use_cpu=True)
    return ExperimentArguments(**settings), training


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


TASK_FILES = {
    "listops": (write_listops, {"max_length": SHORT_LISTOPS["max_length"]}),
    "text": (write_imdb, {"max_length": 64}),
    "retrieval": (write_aan, {"max_length": 32}),
    "image": (write_image_folder, {"image_size": 8}),
    "pathfinder": (write_pathfinder_release, {}),
}


@pytest.mark.parametrize("name", sorted(TASK_FILES))
def test_spt_then_finetune_runs_on_every_task(tmp_path, name):
    write, options = TASK_FILES[name]
    data_args = DataArguments(task=name, data_dir=str(write(tmp_path / "data")),
                              task_options={**options, "cache_dir": str(tmp_path / "cache")})
    run = resolve_run(data_args, ModelArguments(**TINY_MODEL), *tiny_experiment(tmp_path / "run"))
    task = prepare_task(run.task, seed=0)
    config = build_config(task, run.model)
    spt = run_phase(pretrain_phase(task, config, run.pretrain, tmp_path / "run" / "pretrain"))
    arm = run_phase(finetune_phase(task, config, run.finetune, tmp_path / "run" / "spt", "spt",
                                   init_from=tmp_path / "run" / "pretrain"))
    assert spt["eval_loss"] > 0 and 0 <= arm["test_accuracy"] <= 1
    assert config.two_tower == (name == "retrieval")


def test_generated_pathfinder_pretrains_the_image_task(tmp_path):
    data_args = DataArguments(task="image", data_dir=str(write_image_folder(tmp_path / "images")),
                              task_options={"image_size": 32}, pretrain_task="pathfinder",
                              pretrain_task_options={"num_images": 48, "cache_dir": str(tmp_path / "cache")})
    results = run_experiment(data_args, ModelArguments(**TINY_MODEL), *tiny_experiment(tmp_path / "run"))
    image, pathfinder = task_requests(data_args)
    pathfinder_rows = len(prepare_pretrain_task(pathfinder, prepare_task(image, 0), 0).dataset["train"])
    image_rows = len(prepare_task(image, 0).dataset["train"])
    steps = {rows: -(-rows // 8) for rows in (pathfinder_rows, image_rows)}  # one epoch of batch 8
    assert steps[pathfinder_rows] != steps[image_rows], "the two data sets must give different step counts"
    pretrain_log = json.loads((tmp_path / "run" / "pretrain" / "log_history.json").read_text())
    assert results["pretrain"]["eval_loss"] > 0 and pretrain_log[-1]["step"] == steps[pathfinder_rows]
    expected = f"the training inputs of task pathfinder ({pathfinder_rows} rows, labels unused)"
    for phase in ("pretrain", "spt"):  # the fine-tuned model's card names the data its SPT read, not its own task's
        card = ModelCard.load(tmp_path / "run" / phase / "README.md")
        assert card.data.spt["pretraining_data"] == expected, phase


def test_cross_task_spt_with_another_vocabulary_fails_clearly(tmp_path):
    text_args = DataArguments(task="text", data_dir=str(write_imdb(tmp_path / "aclImdb")),
                              task_options={"max_length": 64}, pretrain_task="pathfinder",
                              pretrain_task_options={"num_images": 4, "cache_dir": str(tmp_path / "cache")})
    text, pathfinder = task_requests(text_args)
    task = prepare_task(text, seed=0)
    with pytest.raises(ValueError, match="different vocabulary"):
        prepare_pretrain_task(pathfinder, task, seed=0)


def test_user_csv_with_string_labels_runs_through_run_spt_in_compare_mode(tmp_path):
    files = write_custom_csv(tmp_path / "mine")
    argv = ["--task", "custom", "--train_file", files["train"], "--test_file", files["test"], "--mode", "compare",
            "--output_dir", str(tmp_path / "run"), "--pretrain_epochs", "1", "--finetune_epochs", "1",
            "--per_device_train_batch_size", "8", "--hidden_size", "16", "--num_hidden_layers", "1",
            "--num_attention_heads", "2", "--intermediate_size", "32", "--report_to", "none", "--use_cpu"]
    results = run_spt.run(*run_spt.parse_arguments(argv))
    assert [arm["arm"] for arm in results["arms"]] == ["scratch", "spt"]
    saved = json.loads((tmp_path / "run" / "spt" / "config.json").read_text())
    assert saved["id2label"] == {"0": "angry", "1": "happy", "2": "sad"}
    assert (tmp_path / "run" / "results.md").is_file()


def test_dict_options_parse_from_json_on_the_command_line():
    data = DataArguments(task_options='{"image_size": 16}', pretrain_task_options=None)
    assert data.task_options == {"image_size": 16}
    with pytest.raises(ValueError, match="--task_options must be a JSON object"):
        DataArguments(task_options="image_size=16")
