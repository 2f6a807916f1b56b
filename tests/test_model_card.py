"""Model cards: golden rendering, Hub metadata round trip, and a card in every saved folder."""

from __future__ import annotations

import json
from pathlib import Path

from huggingface_hub import ModelCard
from tiny_backbone_runs import tiny_arguments

from hf_spt.training.model_card import SptModelCardData, model_card, write_model_card
from hf_spt.training.phase_card import starting_weights_reference
from hf_spt.experiments.pipeline import run_experiment

GOLDEN = Path(__file__).parent / "fixtures" / "golden_model_card.md"


def golden_card_data() -> SptModelCardData:
    """Fixed inputs (versions included) so the rendering is byte-stable."""
    return SptModelCardData(
        model_name="markov-spt", phase="spt", task_name="markov", architecture="spt", objective="masked",
        init_from="runs/markov/pretrain", pretraining_data="the training inputs of task markov (4000 rows, labels unused)",
        pretraining_task="masked-token reconstruction (loss on the masked positions only)", pretrain_epochs=30.0,
        mlm_probability=0.15, init_parts=["all weights of runs/markov/pretrain except the task head"], freeze_parts=[],
        seed=0, metrics={"eval_accuracy": 0.9, "eval_loss": 0.25, "test_accuracy": 0.875, "seconds": 12.5},
        training={"learning_rate": 0.001, "optim": "adamw_torch"},
        versions={"hf_spt": "0.1.0", "transformers": "5.0", "torch": "2.0", "huggingface_hub": "1.0"},
    )


def test_rendered_card_matches_golden_file():
    # regenerate after an intended template change: str(model_card(golden_card_data())) > tests/fixtures/golden_model_card.md
    assert str(model_card(golden_card_data())) == GOLDEN.read_text()


def test_card_loads_with_its_metadata(tmp_path):
    path = write_model_card(golden_card_data(), tmp_path)
    card = ModelCard.load(path)
    assert card.data.library_name == "transformers" and card.data.datasets == ["markov"]
    assert "hf_spt" in card.data.tags and card.data.model_name == "markov-spt"
    metrics = {(r.dataset_split, r.metric_type): r.metric_value for r in card.data.eval_results}
    assert metrics == {("validation", "accuracy"): 0.9, ("validation", "loss"): 0.25, ("test", "accuracy"): 0.875}
    assert card.data.spt["freeze_parts"] == [] and card.data.spt["mlm_probability"] == 0.15
    (tmp_path / "bare").mkdir()
    bare = SptModelCardData(model_name="x", phase="scratch", task_name="markov", architecture="spt")
    unknown = write_model_card(bare, tmp_path / "bare")
    assert "| transplanted parts | not recorded |" in unknown.read_text()


def test_every_saved_folder_has_a_card_with_the_run_metrics(tmp_path):
    run_experiment(*tiny_arguments(tmp_path))
    for phase in ("pretrain", "spt", "scratch"):
        result = json.loads((tmp_path / phase / "phase.json").read_text())
        card = ModelCard.load(tmp_path / phase / "README.md")
        metrics = {(r.dataset_split, r.metric_type): r.metric_value for r in card.data.eval_results}
        assert metrics[("validation", "loss")] == result["eval_loss"]
        if phase != "pretrain":
            assert metrics[("test", "accuracy")] == result["test_accuracy"]
        assert "import hf_spt" in card.text and "trust_remote_code=True" in card.text
        assert str(tmp_path) not in str(card) and str(tmp_path.resolve()) not in str(card)  # no local absolute path
    pretrain_card = ModelCard.load(tmp_path / "pretrain" / "README.md")
    assert pretrain_card.data.pipeline_tag == "fill-mask" and pretrain_card.data.spt["pretrain_epochs"] == 1.0
    assert ModelCard.load(tmp_path / "spt" / "README.md").data.spt["init_from"] == "pretrain"  # relative to the run


def test_starting_weights_are_named_by_hub_id_or_run_relative_path(tmp_path):
    (tmp_path / "run" / "pretrain").mkdir(parents=True)
    (tmp_path / "other" / "pretrain").mkdir(parents=True)
    phase = tmp_path / "run" / "spt"
    assert starting_weights_reference(tmp_path / "run" / "pretrain", phase, None) == ("pretrain", None)
    assert starting_weights_reference(tmp_path / "run" / "pretrain", phase, "me/x") == ("me/x-pretrain", "me/x-pretrain")
    assert starting_weights_reference(tmp_path / "other" / "pretrain", phase, "me/x") == ("../other/pretrain", None)
    assert starting_weights_reference("google/bert_uncased_L-2_H-128_A-2", phase, None) == (
        "google/bert_uncased_L-2_H-128_A-2", "google/bert_uncased_L-2_H-128_A-2")
    assert starting_weights_reference(None, phase, "me/x") == (None, None)
