"""Bad input gets one clear message naming the file, row, option or folder, and exit status 2 without a
traceback; unexpected errors keep theirs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from tiny_backbone_runs import tiny_run

from conftest import run_spt_cli

from hf_spt.errors import UserInputError
from hf_spt.experiments.arguments import DataArguments
from hf_spt.experiments.exit_status import USER_ERROR_STATUS, run_cli
from hf_spt.experiments.model_config import build_config
from hf_spt.experiments.pipeline import prepare_task
from hf_spt.experiments.run_spec import TaskRequest, task_requests
from hf_spt.tasks import load_task
from hf_spt.tasks.common import DataFormatError
from hf_spt.tasks.custom import MAX_IMPLIED_LENGTH
from hf_spt.training.model_factory import classification_model, pretraining_model

ROOT = Path(__file__).resolve().parents[1]


def load_ids(tmp_path: Path, ids: list[list[int]], **options):
    pd.DataFrame({"input_ids": ids, "label": [k % 2 for k in range(len(ids))]}).to_parquet(tmp_path / "train.parquet")
    return load_task("custom", train_file=str(tmp_path / "train.parquet"), cache_dir=str(tmp_path / "cache"), **options)


@pytest.mark.parametrize("bad_id, fix", [(-1, "Token ids are never negative."),
                                         (10**9, "Ids that large need --task_options '{\"vocab_size\": N}' (and a model to match).")])
def test_token_ids_out_of_range_name_file_and_row(tmp_path, bad_id, fix):
    rows = [[5, 6, 7]] * 10
    rows[3] = [5, bad_id, 7]
    start = time.perf_counter()
    with pytest.raises(DataFormatError, match=rf"train.parquet, row 4: token id {bad_id} is outside \[0, 65536\)") as error:
        load_ids(tmp_path, rows)  # before: a crash at step 2 (-1), or 8 GB of embeddings allocated (10**9)
    assert time.perf_counter() - start < 30
    assert str(error.value).endswith(fix)  # before: a negative id was told "Ids that large need vocab_size"


def test_vocab_size_option_bounds_the_ids(tmp_path):
    with pytest.raises(DataFormatError, match=r"row 1: token id 300 is outside \[0, 300\)"):
        load_ids(tmp_path, [[5, 300]] * 10, vocab_size=300)
    assert len(load_ids(tmp_path, [[5, 299]] * 10, vocab_size=300).tokenizer) == 300


def test_empty_text_cell_names_file_column_and_row(tmp_path):
    (tmp_path / "train.csv").write_text("text,label\nhello,a\n,b\nworld,a\nagain,b\n")
    with pytest.raises(DataFormatError, match=r"train.csv, column 'text', row 2: the cell is empty"):
        load_task("custom", train_file=str(tmp_path / "train.csv"), cache_dir=str(tmp_path / "cache"))
        # before: AttributeError: 'NoneType' object has no attribute 'encode'


def test_non_utf8_bytes_name_file_and_line(tmp_path):
    (tmp_path / "train.csv").write_bytes(b"text,label\nhello,a\nworld,b\ncaf\xe9,a\nagain,b\n")
    with pytest.raises(DataFormatError, match=r"train.csv, line 4: byte 0xe9 is not UTF-8"):
        load_task("custom", train_file=str(tmp_path / "train.csv"), cache_dir=str(tmp_path / "cache"))
    (tmp_path / "train.jsonl").write_bytes(b'{"text": "a", "label": 0}\n{"text": "caf\xe9", "label": 1}\n')
    with pytest.raises(DataFormatError, match=r"train.jsonl, line 2: byte 0xe9 is not UTF-8"):
        load_task("custom", train_file=str(tmp_path / "train.jsonl"), cache_dir=str(tmp_path / "cache"))
    folder = tmp_path / "listops"
    folder.mkdir()
    for split in ("train", "val", "test"):
        (folder / f"basic_{split}.tsv").write_bytes(b"Source\tTarget\n( [MAX 1 2 ] )\t2\n( [MIN 3 \xff ] )\t3\n")
    with pytest.raises(DataFormatError, match=r"basic_train.tsv, line 3: byte 0xff is not UTF-8"):
        load_task("listops", data_dir=str(folder), cache_dir=str(tmp_path / "cache"))


def test_unknown_task_option_lists_the_valid_ones():
    with pytest.raises(UserInputError, match=r"Task 'markov' has no option\(s\) \['num_trian'\].*num_train"):
        load_task("markov", num_trian=10)  # before: a bare TypeError


def task_request(data_args: DataArguments) -> TaskRequest:
    """The task `data_args` ask for, as a run resolves it (`run_spec.task_requests`)."""
    return task_requests(data_args)[0]


def test_missing_init_from_folder_says_no_such_folder(tmp_path):
    run = tiny_run(tmp_path)
    config = build_config(prepare_task(run.task, seed=0), run.model)
    for missing in (tmp_path / "runs" / "pretrain", "runs/x/pretrain", "./pretrain"):
        with pytest.raises(FileNotFoundError, match=f"No such folder: {missing}"):
            classification_model(config, missing)  # before: advised unsetting HF_HUB_OFFLINE


def test_corrupt_safetensors_names_the_file_and_the_fix(tmp_path):
    run = tiny_run(tmp_path)
    config = build_config(prepare_task(run.task, seed=0), run.model)
    pretraining_model(config, "masked").save_pretrained(tmp_path / "pretrain")
    weights = tmp_path / "pretrain" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(UserInputError, match=f"{weights} is corrupt or truncated.*Re-run the phase"):
        classification_model(config, tmp_path / "pretrain")


def test_cli_prints_user_errors_in_one_line_and_exits_2(capsys, monkeypatch):
    def bad(argv):
        raise DataFormatError(f"data.csv, row 3: bad {argv}")

    with pytest.raises(SystemExit) as exit_info:
        run_cli(bad, ["--flag"])
    assert exit_info.value.code == USER_ERROR_STATUS
    assert capsys.readouterr().err == "error: data.csv, row 3: bad ['--flag']\n"
    with pytest.raises(DataFormatError):  # --debug keeps the traceback, and is not passed on
        run_cli(bad, ["--debug"])
    monkeypatch.setenv("HF_SPT_DEBUG", "1")
    with pytest.raises(DataFormatError):
        run_cli(bad, [])
    monkeypatch.delenv("HF_SPT_DEBUG")

    def bug(argv):
        raise KeyError("internal")

    with pytest.raises(KeyError):  # unexpected errors keep their traceback
        run_cli(bug, [])


def test_run_spt_bad_option_exits_2_without_traceback(tmp_path, capsys):
    command = [sys.executable, str(ROOT / "run_scripts" / "run_spt.py"), "--output_dir", str(tmp_path / "run"),
               "--task_options", '{"num_trian": 10}']
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    status, last_line = run_spt_cli(command[2:], capsys)  # in-process: the script's own entry point
    assert status == 2 and last_line.startswith("error: Task 'markov' has no option(s) ['num_trian']")
    assert not (tmp_path / "run").exists()  # nothing written
    assert run_spt_cli(["--no_such_flag", "1"], capsys)[0] == 2
    debug = subprocess.run(command + ["--debug"], capture_output=True, text=True, env=env)  # a real process's traceback
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def custom_run(tmp_path: Path, train_file: Path) -> list[str]:
    return ["--task", "custom", "--train_file", str(train_file), "--output_dir", str(tmp_path / "run"),
            "--task_options", f'{{"cache_dir": "{tmp_path / "cache"}"}}', "--report_to", "none", "--use_cpu"]


def test_a_huge_row_stops_before_sizing_the_model_and_max_length_truncation_takes_it(tmp_path, capsys):
    texts = [f"review {k}" for k in range(12)]
    texts[6] = "x" * 200_000
    pd.DataFrame({"text": texts, "label": [k % 2 for k in range(12)]}).to_csv(tmp_path / "train.csv", index=False)
    status, err = run_spt_cli(custom_run(tmp_path, tmp_path / "train.csv"), capsys)
    # before: max_length 200000 silently, training ran, and test evaluation asked for 240 GB
    assert status == USER_ERROR_STATUS
    assert err.startswith(f"error: {tmp_path / 'train.csv'}, row 7: column 'text' holds 200000 bytes (tokens), more "
                          f"than the {MAX_IMPLIED_LENGTH} a data file may set as the length by itself. Pass "
                          "--max_length N --truncation")
    data_args = DataArguments(task="custom", train_file=str(tmp_path / "train.csv"), max_length=64, truncation=True)
    task = prepare_task(task_request(data_args), seed=0)
    assert task.preset.max_length == 64
    assert max(len(ids) for split in task.dataset.values() for ids in split["input_ids"]) == 64
    data_args.max_length, data_args.truncation = 200_000, False  # a length given is used as given
    assert prepare_task(task_request(data_args), seed=0).preset.max_length == 200_000


def test_jsonl_labels_mixing_strings_and_integers_name_a_row_of_each(tmp_path, capsys):
    rows = [f'{{"text": "review {k}", "label": {k % 2 if k % 3 else chr(34) + "neg" + chr(34)}}}' for k in range(10)]
    (tmp_path / "train.jsonl").write_text("\n".join(rows) + "\n")
    status, err = run_spt_cli(custom_run(tmp_path, tmp_path / "train.jsonl"), capsys)
    # before: pyarrow's ArrowNotImplementedError ('unique' has no kernel for extension<arrow.json>), a traceback
    assert status == USER_ERROR_STATUS
    assert err == (f"error: {tmp_path / 'train.jsonl'}: label column 'label' mixes kinds of values: row 1 holds the "
                   "string 'neg', row 2 holds the integer 1. Give every label as a class name (a string, e.g. \"1\") "
                   "or every label as a class id (an integer).")


@pytest.mark.parametrize("cell, shown", [("5", "the integer 5"), ('["b"]', "the list ['b']")])
def test_a_non_text_jsonl_cell_names_file_and_row(tmp_path, cell, shown):
    rows = [f'{{"text": {cell if k == 2 else chr(34) + "review" + chr(34)}, "label": {k % 2}}}' for k in range(6)]
    (tmp_path / "train.jsonl").write_text("\n".join(rows) + "\n")
    with pytest.raises(DataFormatError, match=re.escape(f"train.jsonl, column 'text', row 3: the cell holds {shown}, not text")):
        load_task("custom", train_file=str(tmp_path / "train.jsonl"), cache_dir=str(tmp_path / "cache"))
        # before: "must hold text, found extension<arrow.json>", no row


def test_custom_files_come_from_task_options_or_flags_and_never_both_differently():
    from_grid = DataArguments(task="custom", task_options={"train_file": "a.csv", "text_column": "sentence"})
    assert task_request(from_grid).options["train_file"] == "a.csv"  # a flag at its default does not overwrite
    assert task_request(from_grid).options["text_column"] == "sentence"
    both = DataArguments(task="custom", train_file="b.csv", task_options={"train_file": "a.csv"})
    with pytest.raises(UserInputError, match="--train_file 'b.csv' and --task_options' train_file 'a.csv'"):
        task_request(both)
    assert task_request(DataArguments(task="custom", train_file="b.csv")).options["train_file"] == "b.csv"
