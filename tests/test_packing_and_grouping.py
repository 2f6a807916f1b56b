"""Issue 12: length-grouped batches by default where lengths vary, and padding-free (packed) batches.

Packed rows must give each sequence exactly what padding gives it: per-token MLM losses and
logits, pooled vectors and classification logits (the attention kernel may differ on GPU; on CPU
the packed path runs SDPA or eager with a block-diagonal mask, so the math is checked here).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from conftest import tiny_config
from datasets import Dataset, DatasetDict
from torch.utils.data import SequentialSampler
from transformers.trainer_pt_utils import LengthGroupedSampler

from hf_spt import SptForMaskedLM, SptForSequenceClassification
from hf_spt.errors import UserInputError
from hf_spt.experiments.arguments import DataArguments, ExperimentArguments, ModelArguments, SharedTrainingArguments
from hf_spt.experiments.phase_arguments import finetune_arguments, pretrain_arguments
from hf_spt.experiments.run_spec import resolve_run
from hf_spt.models.heads import pool
from hf_spt.models.packing import PackedLayout, pool_packed
from hf_spt.models.tokenization_spt import build_word_tokenizer
from hf_spt.tasks import Task, TaskPreset, load_task
from hf_spt.experiments.suites.grid import check_trainer_settings_of, parse_grid
from hf_spt.training.arguments import FinetuneArguments, PretrainArguments
from hf_spt.training.collators import DataCollatorForClassification, DataCollatorForSpt
from hf_spt.training.finetune_trainer import FinetuneTrainer
from hf_spt.training.padding_free import check_padding_free
from hf_spt.training.length_grouping import default_sampling_strategy, grouping_lengths, lengths_vary

LENGTHS = [5, 12, 3, 9]


def rows(lengths: list[int], seed: int = 0) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(4, 99, (n,), generator=generator).tolist() for n in lengths]


def padded(sequences: list[list[int]]) -> dict[str, torch.Tensor]:
    longest = max(map(len, sequences))
    ids = torch.zeros(len(sequences), longest, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, row in enumerate(sequences):
        ids[i, : len(row)], mask[i, : len(row)] = torch.tensor(row), 1
    return {"input_ids": ids, "attention_mask": mask}


def packed(sequences: list[list[int]]) -> dict[str, torch.Tensor]:
    return {"input_ids": torch.tensor([sum(sequences, [])]),
            "position_ids": torch.cat([torch.arange(len(row)) for row in sequences])[None]}


@pytest.mark.parametrize("position_embedding_type,attn", [("sinusoidal", "sdpa"), ("sinusoidal", "eager"),
                                                           ("rotary", "sdpa"), ("alibi", "sdpa"), ("learned", "sdpa")])
def test_packed_mlm_gives_each_token_the_padded_logits_and_loss(position_embedding_type, attn):
    torch.manual_seed(0)
    model = SptForMaskedLM(tiny_config(position_embedding_type=position_embedding_type)).eval()
    model.set_attn_implementation(attn)
    sequences = rows(LENGTHS)
    with torch.no_grad():
        pad_logits = model(**padded(sequences)).logits
        pack_logits = model(**packed(sequences)).logits[0]
    expected = torch.cat([pad_logits[i, :n] for i, n in enumerate(LENGTHS)])
    torch.testing.assert_close(pack_logits, expected, atol=2e-5, rtol=1e-4)
    # per-sequence losses, with the padding-free collator's labels laid out as padding lays them
    labels = [[-100 if j % 3 else token for j, token in enumerate(row)] for row in sequences]
    with torch.no_grad():
        for i, row in enumerate(sequences):
            alone = model(input_ids=torch.tensor([row]), labels=torch.tensor([labels[i]])).loss
            start = sum(LENGTHS[:i])
            only_row = torch.full((1, sum(LENGTHS)), -100)
            only_row[0, start : start + len(row)] = torch.tensor(labels[i])
            torch.testing.assert_close(model(**packed(sequences), labels=only_row).loss, alone, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("pooling", ["mean", "max", "last", "cls", "last_mean"])
def test_packed_pooling_equals_padded_pooling(pooling):
    torch.manual_seed(0)
    hidden = torch.randn(len(LENGTHS), max(LENGTHS), 8)
    mask = padded(rows(LENGTHS))["attention_mask"]
    flat = torch.cat([hidden[i, :n] for i, n in enumerate(LENGTHS)])[None]
    sequence_ids = torch.cat([torch.full((n,), i) for i, n in enumerate(LENGTHS)])[None]
    positions = torch.cat([torch.arange(n) for n in LENGTHS])[None]
    bounds = torch.tensor([0, *torch.tensor(LENGTHS).cumsum(0).tolist()], dtype=torch.int32)
    for layout in (PackedLayout(sequence_ids, bounds, max(LENGTHS), positions),  # the collator's offsets
                   PackedLayout(sequence_ids, None, max(LENGTHS), positions)):  # derived from position_ids
        torch.testing.assert_close(pool_packed(flat, layout, pooling), pool(hidden, mask, pooling))


@pytest.mark.parametrize("two_tower", [False, True])
def test_packed_classification_gives_the_padded_logits(two_tower):
    torch.manual_seed(0)
    model = SptForSequenceClassification(tiny_config(two_tower=two_tower, pooling="mean")).eval()
    features = [{"input_ids": row, "pair_input_ids": pair, "labels": i % 3}
                for i, (row, pair) in enumerate(zip(rows(LENGTHS), rows(LENGTHS[::-1], seed=1)))]
    if not two_tower:
        features = [{k: v for k, v in f.items() if k != "pair_input_ids"} for f in features]
    tokenizer = build_word_tokenizer([f"s{i}" for i in range(95)])
    padded_batch = DataCollatorForClassification(tokenizer)(features)
    packed_batch = DataCollatorForClassification(tokenizer, padding_free=True)(features)
    assert packed_batch["input_ids"].shape == (1, sum(LENGTHS)) and "attention_mask" not in packed_batch
    with torch.no_grad():
        expected, got = model(**padded_batch), model(**packed_batch)
    torch.testing.assert_close(got.logits, expected.logits, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(got.loss, expected.loss, atol=2e-5, rtol=1e-4)


def test_padding_free_spt_collator_masks_real_tokens_and_restarts_positions():
    tokenizer = build_word_tokenizer([f"s{i}" for i in range(95)])
    collator = DataCollatorForSpt(tokenizer, mlm_probability=0.5, padding_free=True, seed=0)
    batch = collator([{"input_ids": row} for row in rows(LENGTHS)])
    assert set(batch) == {"input_ids", "labels", "position_ids", "seq_idx", "cu_seq_lens_q", "max_length_q"}
    assert batch["position_ids"][0].tolist() == sum((list(range(n)) for n in LENGTHS), [])
    assert batch["seq_idx"][0].tolist() == sum(([i] * n for i, n in enumerate(LENGTHS)), [])
    assert batch["cu_seq_lens_q"].tolist() == [0, 5, 17, 20, 29] and batch["cu_seq_lens_q"].dtype == torch.int32
    assert batch["max_length_q"] == 12
    assert 0 < int((batch["labels"] != -100).sum()) < sum(LENGTHS)
    fixed = collator([{"input_ids": row, "labels": [-100] * len(row)} for row in rows(LENGTHS)])
    assert fixed["labels"].shape == (1, sum(LENGTHS)) and bool((fixed["labels"] == -100).all())


def test_padding_free_needs_a_varlen_backend_and_names_the_path_it_takes(tmp_path):
    tokenizer = build_word_tokenizer([f"s{i}" for i in range(95)])
    data = Dataset.from_dict({"input_ids": rows(LENGTHS), "labels": [0, 1, 2, 0]})
    args = FinetuneArguments(output_dir=str(tmp_path), padding_free=True, use_cpu=True, report_to=[])
    eager = SptForSequenceClassification(tiny_config())
    eager.set_attn_implementation("eager")
    with pytest.raises(UserInputError, match="torch_varlen.*'eager'"):
        FinetuneTrainer(eager, args, data, processing_class=tokenizer)
    model = SptForSequenceClassification(tiny_config())  # sdpa, the default: switched to torch_varlen
    assert check_padding_free(model, args).startswith("block-diagonal SDPA (cpu, not CUDA; float32")
    assert model.config._attn_implementation == "torch_varlen"


def test_padding_free_on_another_architecture_names_it_not_the_classifier_wrapping_it(tmp_path):
    """Issue 54: `--model_type bert --padding_free` was refused naming 'spt_backbone_classifier' (hf_spt's pooling
    head around the backbone), which the user never typed."""
    from transformers import BertConfig

    from hf_spt import BackboneClassifierConfig, BackboneForSequenceClassification

    backbone = BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                          intermediate_size=32)
    model = BackboneForSequenceClassification(BackboneClassifierConfig(backbone=backbone, num_labels=2))
    args = FinetuneArguments(output_dir=str(tmp_path), padding_free=True, use_cpu=True, report_to=[])
    with pytest.raises(UserInputError, match=r"an SPT model \(this one is 'bert'\)"):
        check_padding_free(model, args)


@pytest.mark.parametrize("two_tower", [False, True])
def test_where_the_kernel_runs_batches_carry_no_seq_idx_and_one_offsets_tensor(two_tower, tmp_path, monkeypatch):
    """The kernel reads neither `seq_idx` nor a second copy of the offsets: the trainers' collators leave both out
    there (nothing copied to the device for nothing), and the model pools each sequence as it does with them."""
    from hf_spt.training import padding_free

    monkeypatch.setattr(padding_free, "padding_free_path", lambda model, args: "varlen kernel")
    tokenizer = build_word_tokenizer([f"s{i}" for i in range(95)])
    data = Dataset.from_dict({"input_ids": rows(LENGTHS), "labels": [0, 1, 2, 0],
                              **({"pair_input_ids": rows(LENGTHS[::-1], seed=1)} if two_tower else {})})
    args = FinetuneArguments(output_dir=str(tmp_path), padding_free=True, use_cpu=True, report_to=[])
    torch.manual_seed(0)
    model = SptForSequenceClassification(tiny_config(two_tower=two_tower))
    trainer = FinetuneTrainer(model, args, data, eval_dataset=data, processing_class=tokenizer)
    batch = trainer.data_collator([data[i] for i in range(len(LENGTHS))])
    prefixes = ("", "pair_") if two_tower else ("",)
    assert not {f"{prefix}{key}" for prefix in prefixes for key in ("seq_idx", "cu_seq_lens_k", "max_length_k")} & set(batch)
    with_ids = DataCollatorForClassification(tokenizer, padding_free=True)([data[i] for i in range(len(LENGTHS))])
    assert "seq_idx" in with_ids  # elsewhere (the block-diagonal mask reads it)
    model.eval()
    torch.testing.assert_close(model(**batch).logits, model(**with_ids).logits)


@pytest.mark.parametrize("arguments", [PretrainArguments, FinetuneArguments])
def test_padding_free_refuses_a_pad_multiple_it_never_reads(tmp_path, arguments):
    """Issue 54, item 3: packed rows are never padded, so a given `pad_to_multiple_of` would be recorded in the
    phase's definition and do nothing (before: recorded, and the same run without the flag refused as another)."""
    with pytest.raises(UserInputError, match=r"^--pad_to_multiple_of 8 is not read with --padding_free"):
        arguments(output_dir=str(tmp_path), padding_free=True, pad_to_multiple_of=8, use_cpu=True, report_to=[])
    assert arguments(output_dir=str(tmp_path), padding_free=True, use_cpu=True, report_to=[]).pad_to_multiple_of is None


@pytest.mark.parametrize("arguments", [PretrainArguments, FinetuneArguments])
def test_on_an_accelerator_padding_free_gets_no_pad_multiple_and_rebuilds(tmp_path, arguments, monkeypatch):
    """The accelerator's default width multiple is for padded batches: packed ones never read it, so it is not set
    (else the phase's definition records an unread 8 and arguments rebuilt from their own fields are refused)."""
    import dataclasses

    import hf_spt.training.arguments as training_arguments

    monkeypatch.setattr(training_arguments, "accelerator_available", lambda args: True)
    packed = arguments(output_dir=str(tmp_path), padding_free=True, report_to=[])
    assert packed.pad_to_multiple_of is None
    assert dataclasses.replace(packed).pad_to_multiple_of is None
    assert arguments(output_dir=str(tmp_path), report_to=[]).pad_to_multiple_of == 8


def test_run_spt_and_a_grid_refuse_padding_free_with_a_pad_multiple(tmp_path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    tiny = ["--mode", "scratch", "--task_options", '{"num_train": 16, "num_validation": 8, "num_test": 8}',
            "--hidden_size", "16", "--intermediate_size", "32", "--num_attention_heads", "2", "--num_hidden_layers",
            "1", "--finetune_max_steps", "1", "--use_cpu", "--report_to", "none", "--disable_tqdm", "true"]
    done = subprocess.run([sys.executable, "run_scripts/run_spt.py", "--padding_free", "--pad_to_multiple_of", "8",
                           "--output_dir", str(tmp_path / "run"), *tiny], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root)}, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "--pad_to_multiple_of 8 is not read with --padding_free" in done.stderr and not (tmp_path / "run").exists()
    grid = parse_grid({"seeds": [0], "tasks": {"m": {"task": "markov"}}, "arms": [{"name": "scratch"}],
                       "output_dir": str(tmp_path / "grid"),
                       "experiment": {"padding_free": True, "pad_to_multiple_of": 8}})
    with pytest.raises(UserInputError, match="grid task 'm': --pad_to_multiple_of 8 is not read with --padding_free"):
        check_trainer_settings_of(grid)


def test_lengths_decide_the_default_and_a_pair_counts_its_longer_document():
    assert lengths_vary([500, 2000, 1000, 800]) and not lengths_vary([100] * 8) and not lengths_vary([100, 104])
    pairs = Dataset.from_dict({"input_ids": [[1] * 3, [1] * 9], "pair_input_ids": [[1] * 7, [1] * 2]})
    assert grouping_lengths(pairs) == [7, 9]
    assert grouping_lengths(pairs.select([1])) == [9]  # read through the indices mapping
    assert default_sampling_strategy(Dataset.from_dict({"input_ids": [[1] * 100] * 6})) == "random"


def task_of(lengths: list[int]) -> Task:
    split = Dataset.from_dict({"input_ids": [[5] * n for n in lengths], "labels": [0] * len(lengths)})
    return Task("varied", DatasetDict(train=split, validation=split, test=split),
                build_word_tokenizer(["a"]), TaskPreset(max_length=64, num_labels=2))


def test_each_phase_groups_by_length_when_its_lengths_vary_and_a_given_flag_wins(tmp_path: Path):
    exp, folder = ExperimentArguments(), tmp_path / "phase"
    varied, fixed = task_of([3, 40, 9, 25, 60, 5]), task_of([20] * 6)
    default = SharedTrainingArguments(output_dir=str(tmp_path))
    run = resolve_run(DataArguments(), ModelArguments(), exp, default)
    for spec, build in ((run.pretrain, pretrain_arguments),
                        (run.finetune, lambda *a: finetune_arguments(*a, num_labels=2))):
        assert build(varied, spec, folder).train_sampling_strategy == "group_by_length"
        assert build(fixed, spec, folder).train_sampling_strategy == "random"
    given = SharedTrainingArguments(output_dir=str(tmp_path), train_sampling_strategy="random")
    given_run = resolve_run(DataArguments(), ModelArguments(), exp, given)
    assert pretrain_arguments(varied, given_run.pretrain, folder).train_sampling_strategy == "random"
    assert finetune_arguments(varied, given_run.finetune, folder, num_labels=2).train_sampling_strategy == "random"
    assert given.given()["train_sampling_strategy"] == "random"  # recorded in results.json


def test_trainer_groups_training_batches_and_evaluates_in_order(tmp_path):
    tokenizer = build_word_tokenizer([f"s{i}" for i in range(95)])
    data = Dataset.from_dict({"input_ids": rows([3, 9, 4, 12, 7, 5]), "pair_input_ids": rows([8, 2, 6, 1, 1, 1]),
                              "labels": [0] * 6})
    args = FinetuneArguments(output_dir=str(tmp_path), per_device_train_batch_size=2, report_to=[], use_cpu=True,
                             train_sampling_strategy="group_by_length")
    trainer = FinetuneTrainer(SptForSequenceClassification(tiny_config(two_tower=True)), args, data, data,
                              processing_class=tokenizer)
    sampler = trainer._get_train_sampler()
    assert isinstance(sampler, LengthGroupedSampler) and sampler.lengths == [8, 9, 6, 12, 7, 5]
    assert isinstance(trainer._get_eval_sampler(data), SequentialSampler)


def test_generated_listops_groups_by_length_and_the_default_markov_task_does_not(tmp_path):
    listops = load_task("listops", num_train=24, num_validation=4, num_test=4, min_length=50, max_length=400,
                        num_proc=1, cache_dir=str(tmp_path))
    assert default_sampling_strategy(listops.dataset["train"]) == "group_by_length"
    markov = load_task("markov", num_train=64)
    assert default_sampling_strategy(markov.dataset["train"]) == "random"  # fixed length: its numbers stay
