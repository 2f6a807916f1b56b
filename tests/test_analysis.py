"""Tests of hf_spt.analysis: hand-checked small cases for every probe, on tiny models."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from hf_spt import SptConfig, SptForMaskedLM
from hf_spt.analysis.gradient_probe import gradient_probe, report_score_gradient, row_split, score_gradients
from hf_spt.analysis.positional_kernel import positional_kernel, relative_share
from hf_spt.analysis.proximity import ProximityStats, proximity_scores
from hf_spt.analysis.token_frequency import bucket_losses, frequency_buckets, overall_losses, token_counts
from hf_spt.models.modeling_spt import SptAttention, SptPreTrainedModel

ROOT = Path(__file__).resolve().parents[1]


def tiny_config(**overrides) -> SptConfig:
    sizes = dict(vocab_size=24, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                 max_position_embeddings=16, num_labels=2)
    return SptConfig(**{**sizes, **overrides})


# --- proximity -------------------------------------------------------------------------------

def test_proximity_of_identity_attention_is_hand_computed():
    """Attention on the diagonal only, T = 5: mass within |i-j|<=1 is 1, uniform mass is (2+3+3+3+2)/25."""
    probs = torch.eye(5)[None, None]  # (1, 1, 5, 5)
    scores = proximity_scores((probs,), None, near=1)[0]
    uniform = (2 + 3 + 3 + 3 + 2) / 25
    assert scores["near1_mass"] == pytest.approx([1.0])
    assert scores["near1_uniform"] == pytest.approx(uniform)
    assert scores["near1_ratio"] == pytest.approx([1 / uniform])
    assert scores["mean_distance"] == pytest.approx([0.0])
    # uniform mean |i-j| over 5 tokens: sum of |i-j| over all pairs = 40, / 25
    assert scores["mean_distance_uniform"] == pytest.approx(40 / 25)


def test_proximity_respects_padding_and_uniform_attention_scores_one():
    """Uniform attention over the real tokens scores exactly 1; padded keys and rows are ignored."""
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    probs = mask[:, None, None, :].double().expand(2, 1, 5, 5)
    probs = probs / probs.sum(-1, keepdim=True)
    scores = proximity_scores((probs,), mask, near=1)[0]
    assert scores["near1_ratio"] == pytest.approx([1.0])
    assert scores["mean_distance_ratio"] == pytest.approx([1.0])


def test_proximity_profile_of_previous_token_attention():
    """Every query (but the first) attends to its left neighbour: the profile is 1 at d = -1."""
    probs = torch.zeros(1, 1, 4, 4)
    probs[0, 0, 0, 0] = 1
    for i in range(1, 4):
        probs[0, 0, i, i - 1] = 1
    stats = ProximityStats(max_distance=3)
    stats.update(probs, None)
    distances, profile = stats.profile()
    assert distances == [-3, -2, -1, 0, 1, 2, 3]
    assert profile[0].tolist() == pytest.approx([0, 0, 1, 1 / 4, 0, 0, 0])


# --- positional kernel -----------------------------------------------------------------------

def test_relative_share_of_toeplitz_and_random_kernels():
    index = torch.arange(12)
    toeplitz = torch.exp(-(index[:, None] - index[None, :]).abs().double())
    assert float(relative_share(toeplitz)) == pytest.approx(1.0)
    random = torch.randn(3, 12, 12, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert float(relative_share(random).max()) < 0.35


def test_positional_kernel_matches_the_attention_logits_of_positions_alone():
    """With zero token embeddings, unit LayerNorm and no q/k bias, the kernel is the layer's logits up to LN's division."""
    config = tiny_config()
    model = SptForMaskedLM(config)
    kernel = positional_kernel(model, length=8)
    assert kernel.shape == (2, 8, 8)
    table = model.spt.embeddings.position_table()[:8].double()
    attention = model.spt.layers[0].attention
    q = (table @ attention.q_proj.weight.double().T)[:, :8]
    k = (table @ attention.k_proj.weight.double().T)[:, :8]
    assert torch.allclose(kernel[0], q @ k.T * 8**-0.5)


def test_positional_kernel_needs_an_additive_table():
    with pytest.raises(ValueError, match="no additive position table"):
        positional_kernel(SptForMaskedLM(tiny_config(position_embedding_type="rotary")))


# --- gradient probe --------------------------------------------------------------------------

class UniformAttentionModel(SptPreTrainedModel):
    """The paper's simplified setting: token-only embeddings, one attention layer (residual kept), mean pooling.

    `head` is a linear classifier on the mean-pooled states (supervised) or a linear decoder at
    masked positions (MLM). Positions would enter only queries and keys, which are zero here.
    """

    def __init__(self, vocab: int, dim: int, outputs: int, mlm: bool):
        super().__init__(SptConfig(vocab_size=vocab, hidden_size=dim, num_attention_heads=2,
                                   position_embedding_type="none", attn_implementation="eager"))
        self.embed = nn.Embedding(vocab, dim)
        self.attention = SptAttention(self.config, 0)
        self.head = nn.Linear(dim, outputs)
        self.mlm = mlm
        with torch.no_grad():
            for projection in (self.attention.q_proj, self.attention.k_proj):
                projection.weight.zero_()
                projection.bias.zero_()

    def forward(self, input_ids, labels):
        states = self.embed(input_ids)
        states = states + self.attention(states, None)[0]
        if self.mlm:
            masked = labels != -100
            return SimpleNamespace(loss=nn.functional.cross_entropy(self.head(states[masked]), labels[masked]))
        return SimpleNamespace(loss=nn.functional.cross_entropy(self.head(states.mean(1)), labels))


def local_sequences(count: int, length: int, vocab: int, generator: torch.Generator) -> torch.Tensor:
    """Sequences where the next token is mostly the current one + 1: neighbours predict each other."""
    rows = torch.empty(count, length, dtype=torch.long)
    rows[:, 0] = torch.randint(vocab, (count,), generator=generator)
    for t in range(1, length):
        fresh = torch.randint(vocab, (count,), generator=generator)
        follow = torch.rand(count, generator=generator) < 0.8
        rows[:, t] = torch.where(follow, (rows[:, t - 1] + 1) % vocab, fresh)
    return rows


def shift_closed(rows: torch.Tensor) -> torch.Tensor:
    """Every cyclic shift of every row: (count * length, length)."""
    return torch.cat([torch.roll(rows, shifts=s, dims=1) for s in range(rows.shape[1])])


def test_averaged_supervised_score_gradient_is_blind_at_uniform_attention():
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)
    try:
        generator = torch.Generator().manual_seed(0)
        vocab, length, mask_id = 10, 8, 9
        base = local_sequences(3, length, vocab - 1, generator)
        inputs = shift_closed(base)
        labels = torch.arange(3).repeat(length) % 2  # a shift keeps its sequence's label
        supervised = score_gradients(UniformAttentionModel(vocab, 8, 2, mlm=False), {"input_ids": inputs, "labels": labels})[0]
        report = report_score_gradient(supervised, None)
        assert report.per_example_orthogonal > 1e-3  # each example's own gradient is not zero...
        assert report.averaged_orthogonal < 1e-12 * report.per_example_orthogonal  # ...their average is
        assert report.averaged_along_ones < 1e-12 * report.per_example_orthogonal  # softmax ignores row constants

        masked = torch.rand(inputs.shape, generator=generator) < 0.3
        mlm_inputs = inputs.masked_fill(masked, mask_id)
        mlm_labels = inputs.masked_fill(~masked, -100)
        mlm = score_gradients(UniformAttentionModel(vocab, 8, vocab, mlm=True), {"input_ids": mlm_inputs, "labels": mlm_labels})[0]
        mlm_report = report_score_gradient(mlm, None)
        assert mlm_report.averaged_orthogonal > 1e-3 * mlm_report.per_example_orthogonal
        assert mlm_report.coherence > 1e3 * report.coherence

        # the check can fail: without the shift closure the averaged supervised gradient is not zero
        partial = score_gradients(UniformAttentionModel(vocab, 8, 2, mlm=False),
                                  {"input_ids": inputs[:-1], "labels": labels[:-1]})[0]
        partial_report = report_score_gradient(partial, None)
        assert partial_report.averaged_orthogonal > 1e-6 * partial_report.per_example_orthogonal
    finally:
        torch.set_default_dtype(torch.float32)


def test_row_split_respects_padded_keys():
    gradient = torch.tensor([[[1.0, 2.0, 9.0]]])
    along, orthogonal = row_split(gradient, torch.tensor([[1, 1, 0]]))
    assert along.tolist() == [[[1.5, 1.5, 0.0]]]
    assert orthogonal.tolist() == [[[-0.5, 0.5, 0.0]]]


def test_gradient_probe_on_spt_models_reports_both_states():
    config = tiny_config()
    inputs = torch.randint(4, 24, (4, 10))
    labels = inputs.clone()
    labels[:, ::3] = -100
    report = gradient_probe(config, {"input_ids": inputs, "labels": labels},
                            {"input_ids": inputs, "labels": torch.tensor([0, 1, 0, 1])})
    assert set(report) == {"random_init", "uniform_attention"}
    for state in report.values():
        for loss in ("mlm", "supervised"):
            layer = state[loss][0]
            assert layer["per_example_orthogonal"] > 0
            assert layer["averaged_along_ones"] < 1e-9 * layer["per_example_orthogonal"]
    assert config._attn_implementation == "sdpa"  # the probe restored it


# --- token frequency -------------------------------------------------------------------------

def test_frequency_buckets_and_bucket_losses_by_hand():
    counts = token_counts([[4, 4, 4, 5, 5, 6], [4, 7]], vocab_size=8, special_ids=[0, 1, 2, 3])
    assert counts.tolist() == [0, 0, 0, 0, 4, 2, 1, 1]
    buckets = frequency_buckets(counts, 2)
    assert buckets.tolist() == [-1, -1, -1, -1, 0, 0, 1, 1]
    loss_sum = torch.tensor([0, 0, 0, 0, 2.0, 4.0, 9.0, 1.0], dtype=torch.float64)
    count = torch.tensor([0, 0, 0, 0, 2.0, 2.0, 1.0, 1.0], dtype=torch.float64)
    rows = bucket_losses(loss_sum, count, buckets, counts)
    # unigram loss: -log of the training share (token 4: 4/8, token 5: 2/8), averaged over the masked predictions
    unigram = (2 * math.log(2) + 2 * math.log(4)) / 4
    assert rows[0] == {"bucket": 0, "token_types": 2, "train_share": 0.75, "predictions": 4, "mean_loss": 1.5,
                       "unigram_loss": pytest.approx(unigram)}
    assert rows[1]["mean_loss"] == pytest.approx(5.0) and rows[1]["unigram_loss"] == pytest.approx(math.log(8))
    assert overall_losses(rows) == pytest.approx(((1.5 * 4 + 5.0 * 2) / 6, (unigram * 4 + math.log(8) * 2) / 6))


# --- callback and run_analysis on a tiny compare run -------------------------------------------

TINY_TASK = {"num_train": 48, "num_validation": 16, "num_test": 16, "length": 12}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A tiny compare run (SPT, fine-tuning, scratch) with --log_proximity."""
    from hf_spt.experiments.arguments import DataArguments, ExperimentArguments, ModelArguments, SharedTrainingArguments
    from hf_spt.experiments.pipeline import run_experiment

    output = tmp_path_factory.mktemp("run")
    run_experiment(
        DataArguments(task="markov", task_options=TINY_TASK),
        ModelArguments(hidden_size=16, num_attention_heads=2, intermediate_size=32),
        ExperimentArguments(pretrain_epochs=2, finetune_epochs=1, log_proximity=True),
        SharedTrainingArguments(output_dir=str(output), report_to="none", disable_tqdm=True),
    )
    return output


def test_callback_logs_proximity_to_trainer_logs_and_json(tiny_run):
    records = json.loads((tiny_run / "pretrain" / "proximity_log.json").read_text())
    # train begin, each epoch's evaluation, and the final evaluation of the best model
    assert [r["step"] for r in records] == [0, 2, 4, 4]
    key = "proximity/layer0/near2_ratio"
    assert records[0][key] == pytest.approx(1.0, abs=0.05)  # near-uniform attention at init
    assert {f"proximity/layer0/head{h}/mean_distance_ratio" for h in range(2)} <= set(records[0])
    history = json.loads((tiny_run / "pretrain" / "log_history.json").read_text())
    assert sum(key in entry for entry in history) == len(records)  # went through trainer.log
    assert (tiny_run / "scratch" / "proximity_log.json").is_file()


def run_analysis(argv: list[str]) -> dict:
    """`hf_spt.scripts.run_analysis`'s `run` on `argv`, in this process (its `main` ends the process: the exit-status
    tests)."""
    from hf_spt.scripts.run_analysis import parse_arguments, run

    return run(*parse_arguments(argv))


def test_run_analysis_writes_report_for_several_models(tiny_run, tmp_path, monkeypatch):
    """Every file of the report (report.json, report.md, each figure) is written whole: a temporary file renamed over
    it, so a kill leaves the old report or the new, never half of one."""
    real_replace, replaced = os.replace, []

    def recording_replace(source, target, **kwargs):
        replaced.append(Path(target))
        return real_replace(source, target, **kwargs)

    monkeypatch.setattr(os, "replace", recording_replace)
    run_analysis(["--task", "markov", "--task_options", json.dumps(TINY_TASK), "--model", str(tiny_run / "scratch"),
                  str(tiny_run / "spt"), str(tiny_run / "pretrain"), "--output_dir", str(tmp_path), "--num_examples",
                  "8", "--probe_batch_size", "8", "--weight_decay_sweep", "0.1", "--frequency_buckets", "2"])
    report = json.loads((tmp_path / "report.json").read_text())
    assert set(report["proximity"]) == {"scratch", "spt", "pretrain"}
    assert set(report["positional_kernel"]) == {"scratch", "spt", "pretrain"}
    assert set(report["gradient_probe"]) == {"random_init", "uniform_attention"}
    assert set(report["token_frequency"]) == {"pretrain", "weight_decay=0.1"}
    for name in ("scratch_attention_layer0.png", "spt_kernel.png", "proximity_profile.png",
                 "proximity_during_training.png", "score_gradient_by_offset.png", "token_frequency.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert "## Positional kernel" in (tmp_path / "report.md").read_text()
    assert sorted(tmp_path.iterdir()) == sorted(path for path in replaced if path.parent == tmp_path)


def test_evaluating_restores_training_mode_and_saved_figure_closes(tmp_path):
    import matplotlib.pyplot as plt

    from hf_spt.analysis.eval_mode import evaluating
    from hf_spt.analysis.plotting import saved_figure

    model = SptForMaskedLM(tiny_config()).train()
    with pytest.raises(RuntimeError), evaluating(model) as device:
        assert not model.training and not model.spt.layers[0].training and device.type == "cpu"
        raise RuntimeError("probe failed")
    assert model.training and model.spt.layers[0].training
    open_before = len(plt.get_fignums())
    with saved_figure(tmp_path / "ok.png", ncols=2, figsize=(4, 2)) as (_, axes):
        axes[1].plot([0, 1])
    with pytest.raises(ValueError), saved_figure(tmp_path / "failed.png"):
        raise ValueError("drawing failed")
    assert (tmp_path / "ok.png").stat().st_size > 0 and not (tmp_path / "failed.png").exists()
    assert len(plt.get_fignums()) == open_before


def test_run_analysis_reads_the_run(tiny_run):
    """--run finds the run's models and its task settings (results.json): no --task_options retyped."""
    run_analysis(["--run", str(tiny_run), "--num_examples", "4", "--probe_batch_size", "4", "--frequency_buckets", "2",
                  "--seed", "0"])
    report = json.loads((tiny_run / "analysis" / "report.json").read_text())
    assert report["models"] == {name: str(tiny_run / name) for name in ("scratch", "spt", "pretrain")}
    assert report["task"] == "markov" and report["num_examples"] == 4
    kernel_length = len(report["gradient_probe"]["uniform_attention"]["mlm"][0]["averaged_orthogonal_by_offset"])
    assert kernel_length == 2 * TINY_TASK["length"] - 1  # the run's sequence length, read from results.json


def test_the_report_records_its_code_and_numerics_and_can_be_portable(tiny_run, tmp_path):
    """report.json says which code and CPU numerics computed it (as a run's phase.json does); on the command line,
    --portable_numerics pins the analysis as it pins a training run, and the two computations agree to rounding."""
    from hf_spt.runs import provenance

    argv = ["--run", str(tiny_run), "--model", str(tiny_run / "pretrain"), "--num_examples", "4",
            "--probe_batch_size", "4", "--frequency_buckets", "2"]
    native = run_analysis([*argv, "--output_dir", str(tmp_path / "native")])
    assert native["provenance"]["commit"] == provenance.package_commit()
    assert native["provenance"]["numerics"]["label"] == "native"
    assert "CPU numerics" in (tmp_path / "native" / "report.md").read_text()
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("portable numerics pins x86 AVX2")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(ROOT / "run_scripts" / "run_analysis.py"), *argv, "--output_dir",
               str(tmp_path / "portable"), "--portable_numerics"]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    portable = json.loads((tmp_path / "portable" / "report.json").read_text())
    assert portable["provenance"]["numerics"]["label"] == "portable AVX2"
    for native_layer, portable_layer in zip(native["proximity"]["pretrain"], portable["proximity"]["pretrain"],
                                            strict=True):
        assert native_layer["near2_ratio_mean"] == pytest.approx(portable_layer["near2_ratio_mean"], rel=1e-4)


def test_more_frequency_buckets_than_token_types_get_one_bucket_per_type(tiny_run, tmp_path):
    """A task with fewer token types than --frequency_buckets (Pathfinder has two) is analysed, not refused at the
    end of the report: one bucket per type, said in the report; the `all` row compares with the unigram loss."""
    report = run_analysis(["--run", str(tiny_run), "--model", str(tiny_run / "pretrain"), "--num_examples",
                                    "4", "--probe_batch_size", "4", "--frequency_buckets", "1000",
                                    "--output_dir", str(tmp_path)])
    rows = report["token_frequency"]["pretrain"]
    types = sum(row["token_types"] for row in rows)
    assert len(rows) == types <= 32  # the markov task's 32 symbols, at most
    text = (tmp_path / "report.md").read_text()
    assert f"Only {types} token types occur in training: {types} buckets instead of --frequency_buckets 1000" in text
    assert "| pretrain | all |" in text and "unigram loss" in text


def test_run_analysis_flags_contradicting_the_run_are_errors(tiny_run, tmp_path):
    argv = ["--run", str(tiny_run), "--task_options", json.dumps({**TINY_TASK, "length": 99}), "--seed", "3",
            "--output_dir", str(tmp_path)]
    with pytest.raises(ValueError, match=r"contradict the run's results.json") as error:
        run_analysis(argv)
    assert "--seed 3 (the run recorded 0)" in str(error.value)
    assert "'length': 99} (the run recorded {" in str(error.value) and "'length': 12}" in str(error.value)
    with pytest.raises(FileNotFoundError, match="no results.json or grid.json there"):
        run_analysis(["--run", str(tmp_path)])
    assert not any(tmp_path.iterdir())  # nothing analysed or written


def test_run_analysis_reads_an_ablation_grid(tmp_path):
    """--run on a run_ablation.py folder: one model per arm of the chosen task and seed, on the grid's data."""
    from hf_spt.experiments.suites.grid_runner import run_grid
    from hf_spt.experiments.suites.grid import parse_grid

    grid = {"output_dir": str(tmp_path / "grid"), "seeds": [0, 1],
            "arms": [{"name": "scratch"}, {"name": "spt", "pretrain": True}],
            "tasks": {"m": {"task": "markov", "task_options": TINY_TASK}},
            "experiment": {"pretrain_epochs": 1, "finetune_epochs": 1, "report_to": "none", "use_cpu": True},
            "model": {"num_hidden_layers": 1, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 16}}
    run_grid(parse_grid({**grid, "seeds": [1]}))
    assert json.loads((tmp_path / "grid" / "grid.json").read_text())["seeds"] == [1]  # the grid records itself
    (tmp_path / "grid" / "grid.json").write_text(json.dumps(grid))  # as if both seeds had run
    with pytest.raises(ValueError, match=r"pass --seed, one of \[0, 1\]"):
        run_analysis(["--run", str(tmp_path / "grid")])
    report = run_analysis(["--run", str(tmp_path / "grid"), "--seed", "1", "--num_examples", "4",
                                    "--probe_batch_size", "4", "--frequency_buckets", "2"])
    cells = tmp_path / "grid" / "cells" / "m"
    assert report["models"] == {"scratch_seed1": str(cells / "scratch" / "seed1"),
                                "spt_seed1": str(cells / "spt" / "seed1"),
                                "pretrain_m_e1_L1_s1": str(tmp_path / "grid" / "pretrain" / "m_e1_L1_s1")}
    assert list(report["token_frequency"]) == ["pretrain_m_e1_L1_s1"]  # the SPT checkpoint itself, an MLM
    assert (tmp_path / "grid" / "analysis" / "report.md").is_file()


def rerun(folder: Path, seed: int, **experiment) -> None:
    """Phases of the tiny run trained again into `folder` (`experiment`: the mode and budgets), with `seed`."""
    from hf_spt.experiments.arguments import DataArguments, ExperimentArguments, ModelArguments, SharedTrainingArguments
    from hf_spt.experiments.pipeline import run_experiment

    run_experiment(DataArguments(task="markov", task_options=TINY_TASK),
                   ModelArguments(hidden_size=16, num_attention_heads=2, intermediate_size=32),
                   ExperimentArguments(**experiment),
                   SharedTrainingArguments(output_dir=str(folder), seed=seed, overwrite_output_dir=True,
                                           report_to="none", disable_tqdm=True))


def test_run_analysis_refuses_phases_of_different_runs(tiny_run, tmp_path):
    """A scratch arm re-run with another seed next to the older spt and pretrain phases (before: one report of
    both runs' models, without a word); a pretraining re-run that the spt arm was not fine-tuned from."""
    import shutil

    from hf_spt.runs.one_run import one_run_problems

    mixed = tmp_path / "mixed"
    shutil.copytree(tiny_run, mixed)
    rerun(mixed, seed=1, mode="scratch", finetune_epochs=1)
    with pytest.raises(ValueError, match=r"--run .*mixed: its phase folders come from different runs") as error:
        run_analysis(["--run", str(mixed), "--output_dir", str(tmp_path / "report")])
    message = str(error.value)
    for part in ("spt was trained with seed 0, the run records seed 1",
                 "pretrain was trained with seed 0, the run records seed 1", "the arms read different train data (",
                 "--model FOLDER... to analyse them together anyway"):
        assert part in message
    assert not (tmp_path / "report").exists()
    repretrained = tmp_path / "repretrained"
    shutil.copytree(tiny_run, repretrained)
    rerun(repretrained, seed=0, mode="spt", pretrain_epochs=3)  # the same seed and data, another pretraining
    folders = [repretrained / name for name in ("scratch", "spt", "pretrain")]
    assert one_run_problems(repretrained, folders, 0) == ["spt was fine-tuned from another pretraining than pretrain"]


def test_run_analysis_unreadable_files_exit_2_in_one_line(tiny_run, tmp_path):
    """Half a results.json, a corrupt model.safetensors (before: JSONDecodeError and SafetensorError tracebacks,
    exit status 1)."""
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tiny_run, broken, ignore=shutil.ignore_patterns("analysis"))  # another test's report
    results = broken / "results.json"
    text = results.read_text()
    results.write_text(text[: len(text) // 2])
    env = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    command = [sys.executable, str(ROOT / "run_scripts" / "run_analysis.py"), "--run", str(broken)]
    completed = subprocess.run(command, capture_output=True, text=True, env=env)
    assert completed.returncode == 2 and "Traceback" not in completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --run: {results} is not valid JSON")
    assert "Re-run the command that wrote it" in lines[0]
    results.write_text(text)
    weights = broken / "spt" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    completed = subprocess.run(command, capture_output=True, text=True, env=env)
    assert completed.returncode == 2 and "Traceback" not in completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {weights} is corrupt or truncated")
    assert not (broken / "analysis").exists()
    grid = tmp_path / "grid"
    grid.mkdir()
    (grid / "grid.json").write_text('{"seeds": [0], "tasks"')
    with pytest.raises(ValueError, match=rf"--run: {grid / 'grid.json'} is not valid JSON"):
        run_analysis(["--run", str(grid)])
