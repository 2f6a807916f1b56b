"""A run states its plan before it trains (optimizer steps per phase, as the Trainer counts them), each phase its
expected time after its first steps, and a GPU-sized model on a CPU gets a warning pointing to the small settings."""

from __future__ import annotations

import json
import re
from dataclasses import replace

from tiny_backbone_runs import QUIET, TINY_TASK
from transformers import TrainerControl, TrainerState, TrainingArguments

from hf_spt.experiments.arguments import DataArguments, ExperimentArguments, ModelArguments, SharedTrainingArguments
from hf_spt.experiments.model_config import build_config
from hf_spt.experiments.pipeline import plan_run, prepare_task, run_experiment
from hf_spt.experiments.step_plan import GPU_SIZED_FLOPS, announce_plan, step_flops
from hf_spt.experiments.run_spec import RunSpec, resolve_run
from hf_spt.tasks import task_preset
from hf_spt.training.time_estimate import StepTimeEstimate, duration_text

TINY_MODEL = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)


def test_plan_counts_the_steps_the_trainer_takes_and_each_phase_estimates_its_time(tmp_path, capsys):
    """48 rows; pretraining batch 2, accumulation 2: 12 steps; fine-tuning batch 5 (10 batches, 5 steps an epoch)
    for 1.5 epochs: 8 steps. The plan says so before training, and the phases take exactly those steps."""
    run_experiment(DataArguments(task_options=dict(TINY_TASK)), ModelArguments(**TINY_MODEL),
                   ExperimentArguments(pretrain_epochs=1, finetune_epochs=1.5, pretrain_batch_size=2,
                                       finetune_batch_size=5),
                   SharedTrainingArguments(output_dir=str(tmp_path), gradient_accumulation_steps=2, **QUIET))
    out = capsys.readouterr().out
    planned = {name: int(steps.replace(",", "")) for name, steps in
               re.findall(r"^  (\w+): 48 training rows, .* = ([\d,]+) optimizer steps$", out, re.MULTILINE)}
    assert planned == {"pretrain": 12, "spt": 8, "scratch": 8}
    assert out.index("Plan (markov, 1 process on the CPU):") < out.index("pretrain: 10 steps took")
    for name, steps in planned.items():
        assert json.loads((tmp_path / name / "phase.json").read_text())["steps"] == steps
    # the pretraining phase has 12 steps: its estimate comes after 10; the 8-step arms end before one is due
    assert re.search(r"^pretrain: 10 steps took [\d.e+-]+ s/step; the remaining 2 of 12 steps take about \d+ s\.$",
                     out, re.MULTILINE)
    assert not re.search(r"^(spt|scratch): \d+ steps took", out, re.MULTILINE)
    capsys.readouterr()
    run_experiment(DataArguments(task_options=dict(TINY_TASK)), ModelArguments(**TINY_MODEL),  # a finished re-run
                   ExperimentArguments(pretrain_epochs=1, finetune_epochs=1.5, pretrain_batch_size=2,
                                       finetune_batch_size=5),
                   SharedTrainingArguments(output_dir=str(tmp_path), gradient_accumulation_steps=2, **QUIET))
    assert "Plan" not in capsys.readouterr().out  # nothing left to train, nothing planned


def test_time_estimate_after_min_seconds_and_once_per_session(tmp_path, capsys, monkeypatch):
    clock = iter([100.0, 190.0, 400.0, 500.0])
    monkeypatch.setattr("hf_spt.training.time_estimate.time.perf_counter", lambda: next(clock))
    callback = StepTimeEstimate(min_steps=10, min_seconds=60)
    args = TrainingArguments(output_dir=str(tmp_path / "spt"), report_to="none", use_cpu=True)
    state, control = TrainerState(global_step=40, max_steps=100), TrainerControl()
    callback.on_train_begin(args, state, control)  # a resumed session starts at step 40
    state.global_step = 43
    callback.on_step_end(args, state, control)  # 90 s for 3 steps: over min_seconds, reported
    state.global_step = 60
    callback.on_step_end(args, state, control)  # once a session only
    assert capsys.readouterr().out == "spt: 3 steps took 30 s/step; the remaining 57 of 100 steps take about 28 min.\n"
    assert [duration_text(s) for s in (42, 59.6, 3600 * 3 + 1250)] == ["42 s", "60 s", "3 h 21 min"]


def tiny_run(output_dir, model: ModelArguments | None = None, exp: ExperimentArguments | None = None) -> RunSpec:
    """The tiny Markov task's run with these model and experiment flags, resolved."""
    return resolve_run(DataArguments(task_options=dict(TINY_TASK)), model or ModelArguments(),
                       exp or ExperimentArguments(), SharedTrainingArguments(output_dir=str(output_dir), **QUIET))


def tiny_task(output_dir):
    return prepare_task(tiny_run(output_dir).task, seed=0)


def test_gpu_sized_model_on_a_cpu_is_warned_with_the_small_settings(tmp_path, capsys):
    """The rule (6 x (parameters + layers x length x width) FLOPs a token, over 10^12 a step) tells the GPU presets
    from the CPU-sized ones."""
    task = tiny_task(tmp_path)
    listops = build_config(task, tiny_run(tmp_path, ModelArguments(**task_preset("listops").model)).model)
    markov = build_config(task, tiny_run(tmp_path, ModelArguments(**task_preset("markov").model)).model)
    assert step_flops(listops, 32, 2000)[0] > GPU_SIZED_FLOPS > step_flops(markov, 32, 100)[0] * 100
    long_rows = replace(task, preset=replace(task.preset, max_length=2000))
    announce_plan(plan_run(long_rows, long_rows, listops, tiny_run(tmp_path)), long_rows)
    printed = capsys.readouterr()
    assert "pretrain: 48 training rows, batch 32 per process: 2 steps/epoch x 25 epochs = 50 optimizer steps" in \
        printed.out
    assert printed.err.startswith("warning: a GPU-sized run on a CPU: 18,9")
    assert "run_lra.py --scale mini" in printed.err and "--num_hidden_layers 2 --hidden_size 64" in printed.err
    scratch = plan_run(task, task, markov, tiny_run(tmp_path, exp=ExperimentArguments(mode="scratch")))
    announce_plan(scratch, task)
    printed = capsys.readouterr()
    assert "scratch: 48 training rows" in printed.out and printed.err == ""
