"""LoRA fine-tuning through the pipeline and the command line: Balestriero & Huang's comparison in one
command, adapters after SPT, what a LoRA arm saves and how it loads back, and the flags' errors."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from conftest import tiny_config
from huggingface_hub import ModelCard
from safetensors.torch import load_file
from tiny_backbone_runs import tiny_arguments, tiny_run

from hf_spt import SptForSequenceClassification
from hf_spt.errors import UserInputError
from hf_spt.experiments.exit_status import USER_ERROR_STATUS
from hf_spt.experiments.command_line import parse_arguments
from hf_spt.training.lora_adapters import with_adapters
from hf_spt.experiments.model_config import build_backbone_config
from hf_spt.experiments.pipeline import prepare_task, run_experiment
from hf_spt.runs.folder import resume_checkpoint
from hf_spt.scripts import run_spt
from hf_spt.training.checkpoints import HubNotReadyError
from hf_spt.training.collators import DataCollatorForClassification
from hf_spt.training.model_factory import pretraining_model

peft = pytest.importorskip("peft")

PRESET_SIZES = dict(hidden_size=None, num_attention_heads=None, intermediate_size=None, num_hidden_layers=None)


def save_pretrained_bert(folder: Path) -> Path:
    """A tiny masked-LM BERT saved with save_pretrained: the "pretrained" checkpoint (no Hub)."""
    run = tiny_run(folder, model_type="bert", from_scratch=True)
    task = prepare_task(run.task, seed=0)
    torch.manual_seed(0)
    model = pretraining_model(build_backbone_config(task, run.model), "masked")
    model.save_pretrained(folder / "pretrained")
    task.tokenizer.save_pretrained(folder / "pretrained")
    return folder / "pretrained"


def adapter_tensors(arm_folder: Path) -> dict[str, torch.Tensor]:
    return load_file(arm_folder / "adapter_model.safetensors")


def reloaded_test_loss(run_folder: Path, arm: str, monkeypatch) -> float:
    """The test loss of the arm's adapter, loaded from the run folder with peft's Auto class."""
    monkeypatch.chdir(run_folder)  # adapter_config.json names its base folder relative to the run folder
    model = peft.AutoPeftModelForSequenceClassification.from_pretrained(arm).eval()
    task = prepare_task(tiny_run(run_folder).task, seed=0)
    batch = DataCollatorForClassification(task.tokenizer)([row for row in task.dataset["test"]])
    with torch.no_grad():
        return model(**batch).loss.item()


def test_lora_comparison_runs_the_three_arms_and_saves_a_loadable_adapter(tmp_path, monkeypatch):
    pretrained = save_pretrained_bert(tmp_path)
    run_folder = tmp_path / "run"
    results = run_experiment(*tiny_arguments(run_folder, model_name_or_path=str(pretrained), mode="lora_comparison",
                                             max_steps=3, lora_r=4, **PRESET_SIZES))
    arms = {arm["arm"]: arm for arm in json.loads((run_folder / "results.json").read_text())["arms"]}
    assert list(arms) == ["scratch", "pretrained_lora", "pretrained_full"] == [a["arm"] for a in results["arms"]]
    assert [arms[name]["finetune_method"] for name in arms] == ["full", "lora", "full"]
    for name in ("scratch", "pretrained_full"):
        assert arms[name]["trainable_parameters"] == arms[name]["total_parameters"] > 0
    assert arms["scratch"]["init_from"] is None and arms["pretrained_full"]["init_from"] == str(pretrained)
    scratch_config = json.loads((run_folder / "scratch" / "config.json").read_text())["backbone"]
    assert scratch_config["model_type"] == "bert" and scratch_config["hidden_size"] == 16  # the pretrained's shape
    lora = arms["pretrained_lora"]
    saved = adapter_tensors(run_folder / "pretrained_lora")
    # what trained is what was saved: the adapters (query, value) and the head, nothing of the base
    assert all("lora_" in key or ".classifier." in key for key in saved)
    assert {key.split(".")[-3] for key in saved if "lora_" in key} == {"query", "value"}
    assert lora["trainable_parameters"] == sum(tensor.numel() for tensor in saved.values())
    assert lora["trainable_parameters"] < arms["pretrained_full"]["trainable_parameters"] / 10
    adapters = sum(tensor.numel() for key, tensor in saved.items() if "lora_" in key)
    assert lora["total_parameters"] == arms["pretrained_full"]["total_parameters"] + adapters
    table = (run_folder / "results.md").read_text()
    assert f"| pretrained_lora | {lora['test_accuracy']:.4f} |" in table and "trainable parameters" in table
    # the base folder is the pretrained backbone, bit for bit; the adapter reloads with peft's Auto class
    base = load_file(run_folder / "pretrained_lora" / "base" / "model.safetensors")
    original = load_file(pretrained / "model.safetensors")
    backbone = {key.removeprefix("bert."): value for key, value in original.items() if key.startswith("bert.")}
    assert backbone and all(torch.equal(base[f"backbone.{key}"], value) for key, value in backbone.items())
    # an interrupted LoRA arm resumes: its checkpoints (adapter and head, optimizer) count as complete
    assert resume_checkpoint(run_folder / "pretrained_lora") is not None
    config = json.loads((run_folder / "pretrained_lora" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "pretrained_lora/base"
    assert reloaded_test_loss(run_folder, "pretrained_lora", monkeypatch) == pytest.approx(lora["test_loss"], abs=1e-5)
    card = ModelCard.load(run_folder / "pretrained_lora" / "README.md")
    assert card.data.library_name == "peft" and {"peft", "lora"} <= set(card.data.tags)
    assert card.data.spt["adapter"]["base_weights"] == "pretrained_lora/base"
    assert "AutoPeftModelForSequenceClassification.from_pretrained(\"pretrained_lora\")" in card.text
    assert ModelCard.load(run_folder / "pretrained_full" / "README.md").data.library_name == "transformers"


NO_BASE_CONFIG = "Could not find a config file"  # peft's save-time warning when the adapter's base is not found


def test_saving_a_lora_arm_sends_peft_looking_for_no_base_config(tmp_path, monkeypatch):
    """peft's save checks the base's vocabulary through the config of the folder the adapter names; an arm names
    `spt/base` relative to its run folder, which a process run from elsewhere cannot find: every save warned that
    peft 'Could not find a config file in spt/base' (and, online, asked the Hub for a repo called spt/base)."""
    hub_lookups = []
    monkeypatch.setattr(peft.utils.save_and_load, "check_file_exists_on_hf_hub",
                        lambda *args, **kwargs: hub_lookups.append(args))  # None: peft's "could not tell"
    folder = tmp_path / "run" / "spt"
    torch.manual_seed(0)
    model = with_adapters(SptForSequenceClassification(tiny_config()),
                          tiny_run(tmp_path, finetune_method="lora").finetune.lora, folder)
    monkeypatch.chdir(tmp_path)  # the command's working directory, not the run folder
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.save_pretrained(folder / "checkpoint-1", is_main_process=True)  # as the Trainer saves
    assert not [str(warning.message) for warning in caught if NO_BASE_CONFIG in str(warning.message)]
    assert hub_lookups == []
    saved = folder / "checkpoint-1"
    assert json.loads((saved / "adapter_config.json").read_text())["base_model_name_or_path"] == "spt/base"
    assert all("embed" not in key for key in load_file(saved / "adapter_model.safetensors"))  # base/ holds those


def test_lora_after_spt_trains_the_full_model_then_adapters_on_its_weights(tmp_path, monkeypatch, recwarn):
    run_experiment(*tiny_arguments(tmp_path, finetune_method="lora", lora_r=2, max_steps=2))
    assert not [str(warning.message) for warning in recwarn if NO_BASE_CONFIG in str(warning.message)]
    assert (tmp_path / "pretrain" / "model.safetensors").is_file()  # SPT: the full model
    arms = {arm["arm"]: arm for arm in json.loads((tmp_path / "results.json").read_text())["arms"]}
    assert set(arms) == {"scratch", "spt"}
    for name, arm in arms.items():
        saved = adapter_tensors(tmp_path / name)
        assert {key.split(".")[-3] for key in saved if "lora_" in key} == {"q_proj", "v_proj"}
        # 1 layer x (q_proj, v_proj) x (A: 2x16 + B: 16x2), plus the head
        head = sum(tensor.numel() for key, tensor in saved.items() if "lora_" not in key)
        assert arm["trainable_parameters"] == 2 * (2 * 16 + 16 * 2) + head == sum(t.numel() for t in saved.values())
        assert arm["finetune_method"] == "lora"
    # the spt arm's base folder holds the SPT weights, unchanged by fine-tuning
    pretrained = load_file(tmp_path / "pretrain" / "model.safetensors")
    base = load_file(tmp_path / "spt" / "base" / "model.safetensors")
    shared = [key for key in base if key in pretrained and key.startswith("spt.")]
    assert shared and all(torch.equal(base[key], pretrained[key]) for key in shared)
    assert reloaded_test_loss(tmp_path, "spt", monkeypatch) == pytest.approx(arms["spt"]["test_loss"], abs=1e-5)


@pytest.mark.parametrize("argv,unread", [
    (["--lora_r", "4"], "--lora_r: it is read only with --finetune_method lora"),
    (["--lora_target_modules", "q_proj", "--finetune_method", "full"], "--lora_target_modules"),
    (["--mode", "spt", "--finetune_method", "lora"], "--finetune_method: only fine-tuning reads it"),
    (["--mode", "lora_comparison", "--finetune_method", "lora"], "--mode lora_comparison sets each arm's method"),
    (["--mode", "lora_comparison", "--init_from", "x"], "--init_from"),
])
def test_lora_settings_the_run_does_not_read_are_errors(argv, unread):
    with pytest.raises(UserInputError, match="Settings this run would not read") as error:
        parse_arguments(argv)
    assert unread in str(error.value)


def test_lora_flags_parse_into_the_experiment_arguments():
    exp = parse_arguments(["--finetune_method", "lora", "--lora_r", "4", "--lora_alpha", "16", "--lora_dropout",
                           "0.1", "--lora_target_modules", "q_proj, v_proj"])[2]
    assert (exp.finetune_method, exp.lora_r, exp.lora_alpha, exp.lora_dropout) == ("lora", 4, 16, 0.1)
    with pytest.raises(UserInputError, match="--freeze_parts does not combine with LoRA"):
        parse_arguments(["--finetune_method", "lora", "--freeze_parts", "attention"])
    with pytest.raises(UserInputError, match="--finetune_method 'qlora': must be one of full, lora"):
        parse_arguments(["--finetune_method", "qlora"])


def test_lora_comparison_needs_pretrained_weights(tmp_path):
    with pytest.raises(UserInputError, match="--model_name_or_path"):
        run_experiment(*tiny_arguments(tmp_path, mode="lora_comparison", model_type="bert", from_scratch=True))


def test_missing_peft_on_the_command_line_names_the_extra(tmp_path, without_peft, capsys):
    with pytest.raises(SystemExit) as exit_status:
        run_spt.main(["--finetune_method", "lora", "--output_dir", str(tmp_path), "--use_cpu", "true"])
    assert exit_status.value.code == USER_ERROR_STATUS
    assert '.[peft]' in capsys.readouterr().err
    assert not (tmp_path / "scratch").exists()  # nothing was trained


def test_a_lora_push_still_checks_the_hub_before_training(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubNotReadyError, match="HF_HUB_OFFLINE is set"):
        run_experiment(*tiny_arguments(tmp_path / "run", finetune_method="lora", push_to_hub=True,
                                       hub_model_id="me/markov"))
    assert not (tmp_path / "run").exists()
