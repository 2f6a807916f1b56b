"""The fast paths are taken: MLM logits only at masked positions, length grouping changes no
per-example output, and the benchmark scripts run end to end on a tiny model."""

from __future__ import annotations

import importlib.util
import sys
import json
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from transformers.trainer_pt_utils import LengthGroupedSampler

from hf_spt import SptConfig, SptForMaskedLM, SptForSequenceClassification
from hf_spt.models.tokenization_spt import build_word_tokenizer
from hf_spt.training.arguments import PretrainArguments
from hf_spt.training.collators import DataCollatorForClassification
from hf_spt.training.pretrain_trainer import PretrainTrainer

SCRIPTS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(SCRIPTS))  # the benchmark scripts import their shared helpers as `benchmarking`
from benchmarking import build_model, make_batch, peak_step_bytes, resolve_preset, training_flops  # noqa: E402


def tiny_config(**kwargs) -> SptConfig:
    return SptConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, **kwargs)


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lm_head_projects_only_masked_positions_with_sparse_prediction():
    torch.manual_seed(0)
    model = SptForMaskedLM(tiny_config(sparse_prediction=True)).eval()
    input_ids = torch.randint(4, 40, (3, 20))
    labels = torch.full_like(input_ids, -100)
    labels[0, 2], labels[1, 5], labels[1, 6], labels[2, 19] = 7, 8, 9, 10
    rows_seen = []
    handle = model.lm_head.decoder.register_forward_hook(lambda module, args, out: rows_seen.append(args[0].shape))
    output = model(input_ids=input_ids, labels=labels)
    handle.remove()
    assert rows_seen == [torch.Size([4, 32])]
    assert output.logits.shape == (4, 40)
    full = model(input_ids=input_ids).logits  # (B, T, V) without labels
    assert torch.allclose(output.logits, full[labels != -100], atol=1e-5)


def _per_example_logits(model, features, order, batch_size, collator):
    logits = {}
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        batch = collator([features[i] for i in indices])
        batch.pop("labels")
        with torch.no_grad():
            out = model(**batch).logits
        logits.update({index: row for index, row in zip(indices, out)})
    return logits


def test_length_grouping_leaves_each_example_output_unchanged():
    torch.manual_seed(0)
    model = SptForSequenceClassification(tiny_config(num_labels=3)).eval()
    lengths = torch.randint(3, 60, (80,)).tolist()  # enough for the sampler's mega-batches of 5 batches
    features = [{"input_ids": torch.randint(4, 40, (n,)).tolist(), "labels": 0} for n in lengths]
    tokenizer = build_word_tokenizer([f"s{i}" for i in range(36)])
    collator = DataCollatorForClassification(tokenizer)
    shuffled = torch.randperm(len(features), generator=torch.Generator().manual_seed(1)).tolist()
    grouped = list(LengthGroupedSampler(4, lengths=lengths, generator=torch.Generator().manual_seed(1)))
    assert sorted(grouped) == sorted(shuffled) and grouped != shuffled
    padding = lambda order: sum(max(lengths[i] for i in order[s : s + 4]) * 4 for s in range(0, len(order), 4))
    assert padding(grouped) < padding(shuffled)  # grouping is what removes padding waste
    random_order = _per_example_logits(model, features, shuffled, 4, collator)
    grouped_order = _per_example_logits(model, features, grouped, 4, collator)
    for index in range(len(features)):
        assert torch.allclose(random_order[index], grouped_order[index], atol=1e-5)


def test_spt_trainer_uses_length_grouped_sampler_when_asked(tmp_path):
    tokenizer = build_word_tokenizer([f"s{i}" for i in range(36)])
    data = Dataset.from_dict({"input_ids": [[5] * n for n in (3, 9, 4, 12, 7, 5)], "labels": [0] * 6})
    args = PretrainArguments(output_dir=str(tmp_path), per_device_train_batch_size=2, report_to=[],
                                train_sampling_strategy="group_by_length", use_cpu=True,
                                eval_strategy="no", save_strategy="no", load_best_model_at_end=False)
    trainer = PretrainTrainer(SptForMaskedLM(tiny_config()), args, data, processing_class=tokenizer)
    assert isinstance(trainer._get_train_sampler(), LengthGroupedSampler)


def test_pretrain_trainer_projects_masked_positions_in_training_and_all_in_evaluation(tmp_path):
    tokenizer = build_word_tokenizer([f"s{i}" for i in range(36)])
    data = Dataset.from_dict({"input_ids": [[5, 6, 7, 8, 9, 10, 11, 12]] * 4})
    args = PretrainArguments(output_dir=str(tmp_path), per_device_train_batch_size=4, per_device_eval_batch_size=4,
                             max_steps=1, report_to=[], use_cpu=True, eval_strategy="no", save_strategy="no",
                             load_best_model_at_end=False, mlm_probability=0.5)
    model = SptForMaskedLM(tiny_config())
    trainer = PretrainTrainer(model, args, data, eval_dataset=data, processing_class=tokenizer)
    rows_seen = []
    model.lm_head.decoder.register_forward_hook(lambda module, args, out: rows_seen.append(args[0].shape[:-1]))
    trainer.train()
    assert len(rows_seen) == 1 and len(rows_seen[0]) == 1 and rows_seen[0][0] < 4 * 8  # (N,) masked rows
    trainer.evaluate()
    assert rows_seen[-1] == (4, 8)  # evaluation: the standard (B, T, V) logits
    assert model.config.sparse_prediction is False


def test_spt_trainer_flushes_denormals_on_cpu(tmp_path):
    tokenizer = build_word_tokenizer([f"s{i}" for i in range(36)])
    data = Dataset.from_dict({"input_ids": [[5, 6, 7]] * 4})
    args = PretrainArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True, eval_strategy="no",
                                save_strategy="no", load_best_model_at_end=False)
    torch.set_flush_denormal(False)  # other tests' SptTrainers may have switched it on
    denormal = torch.tensor(1e-40)
    try:
        assert (denormal * 1.0).item() != 0.0
        PretrainTrainer(SptForMaskedLM(tiny_config()), args, data, processing_class=tokenizer)
        assert (denormal * 1.0).item() == 0.0  # denormals read as zero: no slow path in CPU matmuls
    finally:
        torch.set_flush_denormal(False)


def test_training_flops_count_masked_rows_for_spt_only():
    preset = resolve_preset("tiny")
    tokens = preset.batch_size * preset.length
    spt, bert = training_flops("spt_mlm", preset, num_masked=5), training_flops("bert_mlm", preset)
    head_row = 3 * 2 * (preset.hidden_size**2 + preset.hidden_size * preset.vocab_size)
    assert bert - spt == pytest.approx(head_row * (tokens - 5))


@pytest.mark.parametrize("kind", ["spt_mlm", "bert_mlm", "spt_cls", "bert_cls"])
def test_benchmark_models_train_on_the_shared_batch(kind):
    preset = resolve_preset("tiny")
    model = build_model(kind, preset)
    loss = model(**make_batch(kind, preset)).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert model.training and model.config._attn_implementation == "sdpa"


def test_peak_step_memory_is_measured_in_a_fresh_process():
    small, large = (peak_step_bytes("spt_mlm", resolve_preset("tiny", length=n, vocab_size=2000)) for n in (16, 512))
    assert 0 < small < large


def test_throughput_benchmark_runs_and_writes_json(tmp_path, capsys):
    script = load_script("bench_training_throughput")
    output = tmp_path / "throughput.json"
    args = script.parse_arguments(["--presets", "tiny", "--heads", "mlm,cls", "--repetitions", "1", "--threads", "1",
                                   "--matmul_size", "128", "--no_memory", "--pad_fraction", "0.25",
                                   "--output", str(output)])
    script.main(args)
    results = json.loads(output.read_text())["results"]
    assert [r["head"] for r in results] == ["mlm", "cls"]
    assert all(r["speed_ratio"] > 0 and 0 < r["spt_mlm_matmul_share" if r["head"] == "mlm" else "spt_cls_matmul_share"]
               for r in results)
    assert "speed hf_spt/BERT" in capsys.readouterr().out


def test_word_mode_and_quick_mode_pick_their_presets():
    script = load_script("bench_training_throughput")
    assert script.parse_arguments(["--vocab", "32000", "--length", "512"]).presets == "word"
    assert script.parse_arguments(["--quick"]).presets == "pathfinder,word"
    assert script.parse_arguments([]).presets == "pathfinder,text,image,markov"


def test_memory_growth_is_memory_ratio_over_length_ratio(tmp_path, monkeypatch):
    script = load_script("bench_memory_growth")
    quadratic_for_bert = lambda kind, preset, *rest: preset.length * (preset.length if kind == "bert_mlm" else 1) * 2**20
    monkeypatch.setattr(script, "peak_step_bytes", quadratic_for_bert)
    args = script.parse_arguments(["--preset", "tiny", "--lengths", "32,16,64", "--output", str(tmp_path / "m.json")])
    growth = script.main(args)["growth"]
    assert growth["spt_mlm"] == {16: 1.0, 32: 1.0, 64: 1.0}
    assert growth["bert_mlm"] == {16: 1.0, 32: 2.0, 64: 4.0}


def test_data_benchmark_runs(tmp_path):
    script = load_script("bench_data_throughput")
    args = script.parse_arguments(["--num_texts", "20", "--max_length", "64", "--batch_size", "2", "--preset", "tiny",
                                   "--repetitions", "1", "--threads", "1"])
    result = script.main(args)
    assert result["num_tokens"] > 0 and 0 < result["collate_share"]["hf_spt"] < 1


def test_gpu_benchmark_explains_what_it_needs_without_cuda(capsys):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present; the benchmark would run for real")
    script = load_script("bench_gpu_mfu")
    with pytest.raises(SystemExit) as exit_info:
        script.main(script.parse_arguments([]))
    assert exit_info.value.code == 2
    assert "needs a CUDA device" in capsys.readouterr().out


def test_real_tokens_benchmark_runs(tmp_path):
    output = tmp_path / "real_tokens.json"
    results = load_script("bench_real_tokens").main(
        ["--distributions", "imdb", "--rows", "64", "--batch_size", "4", "--hidden_size", "16", "--num_heads", "2",
         "--num_layers", "1", "--max_length", "1200", "--threads", "1", "--no_memory", "--output", str(output)])
    assert [r["phase"] for r in results] == ["mlm", "cls"]
    for result in results:  # the same rows on both paths: the same real tokens, less padding when grouped by length
        assert result["hf_spt"]["real_tokens"] == result["bert"]["real_tokens"]
        assert result["hf_spt"]["padding_share"] < result["bert"]["padding_share"]
        assert result["hf_spt"]["attention_on_real"] > result["bert"]["attention_on_real"]
    assert json.loads(output.read_text())["results"][0]["speed_ratio"] > 0
