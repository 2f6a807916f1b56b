"""Bad input gets one clear message naming the file, row, option or folder, and exit status 2 without a
traceback; unexpected errors keep theirs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from tiny_backbone_runs import tiny_arguments

from hf_spt.errors import UserInputError
from hf_spt.experiments.cli import USER_ERROR_STATUS, run_cli
from hf_spt.experiments.model_config import build_config
from hf_spt.experiments.pipeline import prepare_task
from hf_spt.tasks import load_task
from hf_spt.tasks.common import DataFormatError
from hf_spt.training.model_factory import classification_model, pretraining_model

ROOT = Path(__file__).resolve().parents[1]


def load_ids(tmp_path: Path, ids: list[list[int]], **options):
    pd.DataFrame({"input_ids": ids, "label": [k % 2 for k in range(len(ids))]}).to_parquet(tmp_path / "train.parquet")
    return load_task("custom", train_file=str(tmp_path / "train.parquet"), cache_dir=str(tmp_path / "cache"), **options)


@pytest.mark.parametrize("bad_id", [-1, 10**9])
def test_token_ids_out_of_range_name_file_and_row(tmp_path, bad_id):
    rows = [[5, 6, 7]] * 10
    rows[3] = [5, bad_id, 7]
    start = time.perf_counter()
    with pytest.raises(DataFormatError, match=rf"train.parquet, row 4: token id {bad_id} is outside \[0, 65536\)"):
        load_ids(tmp_path, rows)  # before: a crash at step 2 (-1), or 8 GB of embeddings allocated (10**9)
    assert time.perf_counter() - start < 30


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


def test_missing_init_from_folder_says_no_such_folder(tmp_path):
    data_args, model_args, *_ = tiny_arguments(tmp_path)
    config = build_config(prepare_task(data_args, seed=0), model_args)
    for missing in (tmp_path / "runs" / "pretrain", "runs/x/pretrain", "./pretrain"):
        with pytest.raises(FileNotFoundError, match=f"No such folder: {missing}"):
            classification_model(config, missing)  # before: advised unsetting HF_HUB_OFFLINE


def test_corrupt_safetensors_names_the_file_and_the_fix(tmp_path):
    data_args, model_args, *_ = tiny_arguments(tmp_path)
    config = build_config(prepare_task(data_args, seed=0), model_args)
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


def test_run_spt_bad_option_exits_2_without_traceback(tmp_path):
    command = [sys.executable, str(ROOT / "run_scripts" / "run_spt.py"), "--output_dir", str(tmp_path / "run"),
               "--task_options", '{"num_trian": 10}']
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    quiet = subprocess.run(command, capture_output=True, text=True, env=env)
    assert quiet.returncode == 2 and "Traceback" not in quiet.stderr
    assert quiet.stderr.strip().splitlines()[-1].startswith("error: Task 'markov' has no option(s) ['num_trian']")
    assert not (tmp_path / "run").exists()  # nothing written
    unknown_flag = subprocess.run(command[:2] + ["--no_such_flag", "1"], capture_output=True, text=True, env=env)
    assert unknown_flag.returncode == 2 and "Traceback" not in unknown_flag.stderr
    debug = subprocess.run(command + ["--debug"], capture_output=True, text=True, env=env)
    assert debug.returncode == 1 and "Traceback" in debug.stderr
