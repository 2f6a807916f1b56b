"""A phase folder records what defines its run; a differently defined re-run stops before any work."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from datasets import Dataset
from transformers import TrainingArguments

from hf_spt.atomic_files import TEMPORARY_FILE
from hf_spt.runs.phase_definition import (
    DEFINITION_NAME,
    PhaseDefinitionMismatch,
    check_phase_folder,
    dataset_fingerprint,
    differences,
    phase_definition,
    record_definition,
    training_settings,
)


def test_fingerprint_follows_content_not_identity():
    rows = {"input_ids": [[4, 5, 6], [7, 8]], "labels": [0, 1]}
    assert dataset_fingerprint(Dataset.from_dict(rows)) == dataset_fingerprint(Dataset.from_dict(rows))
    changed = {"input_ids": [[4, 5, 6], [7, 9]], "labels": [0, 1]}
    assert dataset_fingerprint(Dataset.from_dict(changed)) != dataset_fingerprint(Dataset.from_dict(rows))
    relabelled = {"input_ids": [[4, 5, 6], [7, 8]], "labels": [1, 1]}
    assert dataset_fingerprint(Dataset.from_dict(relabelled)) != dataset_fingerprint(Dataset.from_dict(rows))


def test_fingerprint_of_a_selection_is_that_of_its_rows():
    data = Dataset.from_dict({"x": [1, 2, 3, 4]})
    assert dataset_fingerprint(data.select([2, 3])) == dataset_fingerprint(Dataset.from_dict({"x": [3, 4]}))
    assert dataset_fingerprint(data.select([3, 2])) != dataset_fingerprint(data.select([2, 3]))


def test_training_settings_ignore_where_a_run_reports(tmp_path):
    one = TrainingArguments(output_dir=str(tmp_path / "a"), learning_rate=1e-3, logging_steps=7, report_to="none")
    two = TrainingArguments(output_dir=str(tmp_path / "b"), learning_rate=1e-3, logging_steps=9, report_to="none")
    assert training_settings(one) == training_settings(two)
    three = TrainingArguments(output_dir=str(tmp_path / "a"), learning_rate=2e-3, report_to="none")
    assert differences(training_settings(one), training_settings(three)) == ["learning_rate: 0.001 -> 0.002"]


def _definition(tmp_path, seed: int = 0, width: int = 64, rows=((4, 5), (6, 7))) -> dict:
    data = {"train": Dataset.from_dict({"input_ids": [list(r) for r in rows], "labels": [0, 1]})}
    args = TrainingArguments(output_dir=str(tmp_path / "phase"), seed=seed, report_to="none")
    return phase_definition(phase="scratch", seed=seed, data=data, model_config={"hidden_size": width}, args=args)


def test_same_definition_passes_and_a_changed_one_lists_every_difference(tmp_path):
    folder = tmp_path / "phase"
    check_phase_folder(folder, _definition(tmp_path))  # nothing there yet
    record_definition(folder, _definition(tmp_path))
    (folder / "phase.json").write_text("{}")
    check_phase_folder(folder, _definition(tmp_path))  # the same run again: skip or resume
    with pytest.raises(PhaseDefinitionMismatch) as raised:
        check_phase_folder(folder, _definition(tmp_path, seed=1, width=32))
    message = str(raised.value)
    assert "seed: 0 -> 1" in message and "model.hidden_size: 64 -> 32" in message and "training.seed: 0 -> 1" in message
    assert "--overwrite_output_dir" in message and "--output_dir" in message


def test_changed_data_is_a_difference(tmp_path):
    folder = tmp_path / "phase"
    record_definition(folder, _definition(tmp_path))
    with pytest.raises(PhaseDefinitionMismatch, match=r"data\.train"):
        check_phase_folder(folder, _definition(tmp_path, rows=((4, 5), (6, 8))))


def test_a_folder_without_a_recorded_definition_is_refused(tmp_path):
    folder = tmp_path / "phase"
    (folder / "checkpoint-3").mkdir(parents=True)
    with pytest.raises(PhaseDefinitionMismatch, match=f"no {DEFINITION_NAME}"):
        check_phase_folder(folder, _definition(tmp_path))


def test_a_definition_killed_mid_write_leaves_a_folder_that_can_be_judged(tmp_path):
    folder = tmp_path / "phase"
    folder.mkdir()
    (folder / f".{DEFINITION_NAME}.0123456789abcdef.tmp").write_text('{"hf_sp')  # killed before the rename
    check_phase_folder(folder, _definition(tmp_path))  # before: refused as an unrecorded run
    record_definition(folder, _definition(tmp_path))
    check_phase_folder(folder, _definition(tmp_path))


def test_the_definition_is_written_through_the_atomic_writer(tmp_path, monkeypatch):
    """Issue 54: `record_definition` kept its own fixed-name temporary (two writers of one folder would write into
    one file); it now writes through `hf_spt.atomic_files`, whose temporaries are unique (`TEMPORARY_FILE`)."""
    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda source, target: renamed.append((Path(source).name, Path(target).name))
                        or real_replace(source, target))
    record_definition(tmp_path / "phase", _definition(tmp_path))
    assert len(renamed) == 1 and renamed[0][1] == DEFINITION_NAME and TEMPORARY_FILE.fullmatch(renamed[0][0])
    assert [path.name for path in (tmp_path / "phase").iterdir()] == [DEFINITION_NAME]


def test_fine_tuning_method_lora_and_early_stopping_are_part_of_the_definition():
    from hf_spt.experiments.arguments import (DataArguments, ExperimentArguments, ModelArguments,
                                              SharedTrainingArguments)
    from hf_spt.experiments.phases import finetune_settings
    from hf_spt.experiments.run_spec import resolve_run

    def finetuning(**experiment):
        """The fine-tuning phase's resolved settings under these experiment flags."""
        return resolve_run(DataArguments(), ModelArguments(), ExperimentArguments(**experiment),
                           SharedTrainingArguments(output_dir="run")).finetune

    full = finetune_settings(finetuning(), "full")
    lora = finetune_settings(finetuning(finetune_method="lora", lora_r=4), "lora")
    patient = finetune_settings(finetuning(early_stopping_patience=3), "full")
    assert "finetune_method: 'full' -> 'lora'" in differences(full, lora)
    assert any(line.startswith("lora:") or line.startswith("lora.") for line in differences(full, lora))
    assert differences(full, patient) == ["early_stopping_patience: None -> 3"]
    assert differences(lora, finetune_settings(finetuning(finetune_method="lora", lora_r=8), "lora")) == [
        "lora.r: 4 -> 8"]
