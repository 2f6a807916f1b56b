"""The LRA release read as released: the empty PNG it ships, metadata saved with np.save, images of another
size, the tfds difficulty names, and a trailing blank line in the TSV files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from task_files import write_aan, write_listops, write_pathfinder_release

from hf_spt.errors import MissingInputError
from hf_spt.tasks import load_task
from hf_spt.tasks.common import DataFormatError
from hf_spt.tasks.pathfinder_generator import write_pathfinder


def _pathfinder(tmp_path: Path, **options):
    return load_task("pathfinder", data_dir=str(tmp_path / "pf"), cache_dir=str(tmp_path / "cache"), **options)


def test_an_empty_png_is_skipped_and_counted_as_lra_does(tmp_path, caplog):
    root = write_pathfinder_release(tmp_path / "pf", num_images=30)
    next(root.rglob("sample_7.png")).write_bytes(b"")  # as the release's curv_baseline sample_172.png
    with caplog.at_level("WARNING"):
        task = _pathfinder(tmp_path)
    assert sum(len(task.dataset[split]) for split in task.dataset) == 29
    assert "skipped 1 empty image file" in caplog.text and "sample_7.png" in caplog.text
    assert task.data_notes == [f"1 empty image file(s) of {tmp_path / 'pf' / 'curv_contour_length_14'} skipped, as "
                               "LRA's pipeline skips them"]
    assert _pathfinder(tmp_path).data_notes == task.data_notes  # read from the cache too


def test_the_phase_record_counts_the_skipped_images(tmp_path):
    from tiny_backbone_runs import tiny_arguments

    from hf_spt.experiments.pipeline import run_experiment

    root = write_pathfinder(tmp_path / "pf", 20, image_size=32)
    next(root.rglob("sample_3.png")).write_bytes(b"")
    data, model, exp, training = tiny_arguments(tmp_path / "run", mode="scratch")
    data.task, data.data_dir, data.task_options = "pathfinder", str(tmp_path / "pf"), {}
    result = run_experiment(data, model, exp, training)
    assert result["arms"][0]["data_notes"] == [f"1 empty image file(s) of {root} skipped, as LRA's pipeline skips them"]
    assert json.loads((tmp_path / "run/scratch/phase.json").read_text())["data_notes"] == result["arms"][0]["data_notes"]


def test_metadata_saved_with_np_save_is_read_like_the_text_lines(tmp_path):
    root = write_pathfinder_release(tmp_path / "pf", num_images=30)
    text = _pathfinder(tmp_path)
    for metadata in root.rglob("metadata/*.npy"):
        rows = np.array([line.split() for line in metadata.read_text().splitlines()])
        with open(metadata, "wb") as handle:  # np.save to the same name (np.save itself would append .npy)
            np.save(handle, rows)
    binary = load_task("pathfinder", data_dir=str(tmp_path / "pf"), cache_dir=str(tmp_path / "cache2"))
    assert binary.dataset["test"]["input_ids"] == text.dataset["test"]["input_ids"]
    for metadata in root.rglob("metadata/*.npy"):
        with open(metadata, "wb") as handle:
            np.save(handle, np.arange(6.0))
    with pytest.raises(DataFormatError, match="binary NumPy file holding a float64 array"):
        load_task("pathfinder", data_dir=str(tmp_path / "pf"), cache_dir=str(tmp_path / "cache3"))


@pytest.mark.parametrize("task, written, message", [("pathfinder", 64, "64x64 pixels, not 32x32"),
                                                    ("pathx", 32, "32x32 pixels, not 128x128")])
def test_images_of_another_size_are_refused_not_resized(tmp_path, task, written, message):
    write_pathfinder(tmp_path / "pf", 6, image_size=written)
    with pytest.raises(DataFormatError, match=message):
        load_task(task, data_dir=str(tmp_path / "pf"), cache_dir=str(tmp_path / "cache"))


def test_difficulty_takes_the_tfds_names_and_a_missing_one_lists_the_folders(tmp_path):
    write_pathfinder_release(tmp_path / "pf", num_images=20)
    assert len(_pathfinder(tmp_path, difficulty="hard").dataset["train"]) == 16
    with pytest.raises(MissingInputError, match="the folders present: curv_contour_length_14"):
        _pathfinder(tmp_path, difficulty="easy")
    shutil.move(tmp_path / "pf", tmp_path / "pf_inner")
    (tmp_path / "pf").mkdir()
    shutil.move(tmp_path / "pf_inner", tmp_path / "pf" / "pathfinder32")  # unpacked one level down
    with pytest.raises(MissingInputError, match="one level too high or low"):
        _pathfinder(tmp_path)


def test_a_trailing_blank_line_in_the_tsv_files_is_no_example(tmp_path):
    listops, aan = write_listops(tmp_path / "listops"), write_aan(tmp_path / "aan")
    before = {name: load_task(name, data_dir=str(folder), cache_dir=str(tmp_path / f"c_{name}"))
              for name, folder in (("listops", listops), ("retrieval", aan))}
    for path in (*listops.glob("*.tsv"), *aan.glob("*.tsv")):
        path.write_text(path.read_text() + "\n\n")
    for name, folder in (("listops", listops), ("retrieval", aan)):
        after = load_task(name, data_dir=str(folder), cache_dir=str(tmp_path / f"c2_{name}"))
        assert {s: len(d) for s, d in after.dataset.items()} == {s: len(d) for s, d in before[name].dataset.items()}


def test_the_saved_listops_tokenizer_gives_exactly_the_training_tokens(tmp_path):
    from transformers import AutoTokenizer

    from hf_spt.tasks.listops import read_listops_tsv

    row = "( ( ( ( [MAX 2 ) 9 ) ( ( [MED 4 ) 7 ) ] ) 3 ) ]"  # the release's form: parentheses around arguments
    (tmp_path / "basic_test.tsv").write_text(f"Source\tTarget\n{row}\t9\n")
    trained = next(read_listops_tsv(str(tmp_path / "basic_test.tsv"), ""))["input_ids"]
    task = load_task("listops", data_dir=str(write_listops(tmp_path / "listops")), cache_dir=str(tmp_path / "cache"))
    task.tokenizer.save_pretrained(tmp_path / "saved")
    for tokenizer in (task.tokenizer, AutoTokenizer.from_pretrained(tmp_path / "saved")):
        ids = tokenizer(row, add_special_tokens=False)["input_ids"]
        assert ids == trained and tokenizer.unk_token_id not in ids and len(ids) == 9
