"""No run turns transformers' Hub kernels on unless asked (`training.hub_kernels`).

transformers >= 5.25 kernelizes every `from_pretrained` model by default, and re-kernelizes it at each
`train()`/`eval()` for its device; on a GPU that fetches `kernels-community/*` from the Hub. On a CPU nothing is
fetched, so these tests put a recorder where transformers kernelizes (`modeling_utils.kernelize`, which
`set_use_kernels` and the `train()` switch call) and check, for every loader of a run path and a whole run, that
it is never reached, on whichever device the model would sit. A canary first shows the recorder sits on the
trigger, so the suite fails if transformers moves it.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
import transformers.modeling_utils as modeling_utils
from tiny_backbone_runs import tiny_arguments, tiny_run
from transformers.utils import is_kernels_available

from conftest import tiny_config
from hf_spt import SptForSequenceClassification
from hf_spt.analysis.report import load_for_analysis
from hf_spt.errors import UserInputError
from hf_spt.experiments.model_config import build_backbone_config
from hf_spt.experiments.pipeline import prepare_task, run_experiment
from hf_spt.training.hub_kernels import set_hub_kernels
from hf_spt.training.model_factory import classification_model, pretraining_model

needs_kernels = pytest.mark.skipif(not is_kernels_available(), reason="the `kernels` package is not installed")


@pytest.fixture
def kernelized(monkeypatch) -> list[str]:
    """The class names of the models transformers kernelized while the test ran (nothing is really swapped)."""
    calls: list[str] = []

    def record(model, *args, **kwargs):
        calls.append(type(model).__name__)
        model._use_kernels = True  # as the real kernelize leaves it, so train()/eval() re-kernelize as they would

    monkeypatch.setattr(modeling_utils, "kernelize", record)
    return calls


def _switch_modes(model) -> None:
    model.train()
    model.eval()


@pytest.fixture
def spt_checkpoint(tmp_path):
    folder = tmp_path / "spt"
    pretraining_model(tiny_config(), "masked").save_pretrained(folder)
    return folder


@needs_kernels
def test_canary_the_recorder_sits_where_transformers_kernelizes(spt_checkpoint, kernelized):
    model = SptForSequenceClassification.from_pretrained(spt_checkpoint, use_kernels=True)
    _switch_modes(model)
    assert kernelized and model.use_kernels


def test_spt_loaders_never_kernelize(spt_checkpoint, kernelized):
    models = [pretraining_model(tiny_config(), "masked", spt_checkpoint),
              classification_model(tiny_config(), spt_checkpoint),
              load_for_analysis(spt_checkpoint)]
    for model in models:
        _switch_modes(model)
        assert not model.use_kernels
    assert kernelized == []


def test_backbone_loaders_never_kernelize(tmp_path, kernelized):
    run = tiny_run(tmp_path, model_type="bert", from_scratch=True)
    config = build_backbone_config(prepare_task(run.task, run.seed), run.model)
    pretraining_model(config, "masked").save_pretrained(tmp_path / "bert")
    for model in (pretraining_model(config, "masked", tmp_path / "bert"), classification_model(config, tmp_path / "bert")):
        _switch_modes(model)
    assert kernelized == []


def test_a_whole_run_never_kernelizes_and_records_the_setting(tmp_path, kernelized):
    run_experiment(*tiny_arguments(tmp_path))
    assert kernelized == []
    for phase in ("pretrain", "spt", "scratch"):
        definition = json.loads((tmp_path / phase / "phase_definition.json").read_text())
        assert definition["training"]["use_hub_kernels"] is False


@needs_kernels
def test_asked_for_every_arm_gets_them(spt_checkpoint, kernelized):
    built = classification_model(tiny_config(), use_hub_kernels=True)
    loaded = classification_model(tiny_config(), spt_checkpoint, use_hub_kernels=True)
    assert built.use_kernels and loaded.use_kernels
    assert kernelized == ["SptForSequenceClassification", "SptForSequenceClassification"]


def test_asked_for_without_the_kernels_package_is_a_user_error(monkeypatch):
    import hf_spt.training.hub_kernels as hub_kernels

    monkeypatch.setattr(hub_kernels, "is_kernels_available", lambda: False)
    with pytest.raises(UserInputError, match="--use_hub_kernels needs the `kernels` package"):
        set_hub_kernels(classification_model(tiny_config()), True)


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="a GPU test (benchmarks/gpu_self_check.py runs it)")


@needs_cuda
def test_on_a_gpu_a_loaded_model_switches_modes_offline(spt_checkpoint):
    """Where transformers maps GPU kernels (GELU on CUDA), a loaded model's eval() fetched them from the Hub: offline
    the default experiment's SPT fine-tuning stopped at its first evaluation. Here with transformers' real kernelize."""
    model = classification_model(tiny_config(), spt_checkpoint).to("cuda")
    _switch_modes(model)
    batch = {"input_ids": torch.randint(4, 99, (2, 16), device="cuda")}
    assert model(**batch).logits.shape == (2, 3) and not model.use_kernels


@needs_cuda
def test_on_a_gpu_a_whole_run_evaluates_offline(tmp_path):
    data, model_args, experiment, training = tiny_arguments(tmp_path)
    results = run_experiment(data, model_args, experiment, replace(training, use_cpu=False))
    assert [arm["arm"] for arm in results["arms"]] == ["scratch", "spt"]
