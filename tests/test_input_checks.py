"""Settings that would train on nothing or crash mid-run stop before training, with one line naming the setting,
the value and the fix (issue 20, items 7 and 10)."""

from __future__ import annotations

import pytest
from tiny_backbone_runs import tiny_arguments

from hf_spt.errors import UserInputError
from hf_spt.experiments.model_config import build_config
from hf_spt.experiments.pipeline import prepare_task, run_experiment
from hf_spt.training.arguments import PretrainArguments
from hf_spt.training.model_factory import pretraining_model
from hf_spt.training.pretrain_trainer import PretrainTrainer


def test_a_masking_rate_that_masks_nothing_stops_before_training(tmp_path):
    """--mlm_probability 1e-5 on 48 rows of 16 tokens: no masked token in a batch nor in the validation masking
    (before: loss 0.0, grad norm 0, eval_loss NaN recorded)."""
    with pytest.raises(UserInputError, match=r"--mlm_probability 1e-05 masks next to nothing: about 0.0051 masked "
                                             r"tokens per training batch of 32 rows, and the fixed validation masking "
                                             r"holds 0 masked tokens.*eval_loss NaN.*0.1 to 0.5"):
        run_experiment(*tiny_arguments(tmp_path, mode="spt", mlm_probability=1e-5))
    assert not list((tmp_path / "pretrain").glob("checkpoint-*")) and not (tmp_path / "pretrain" / "phase.json").exists()


def test_a_masking_rate_with_empty_training_batches_is_refused_even_when_validation_has_masks(tmp_path):
    """0.01 of 16-token rows in batches of 2: 0.32 masked tokens a batch (most batches empty), though the 16
    validation rows' fixed masking holds some; 0.05 in batches of 2 (1.6 a batch) trains."""
    data_args, model_args, *_ = tiny_arguments(tmp_path)
    task = prepare_task(data_args, seed=0)
    model = pretraining_model(build_config(task, model_args), "masked")

    def trainer(rate: float) -> PretrainTrainer:
        args = PretrainArguments(output_dir=str(tmp_path), per_device_train_batch_size=2, mlm_probability=rate,
                                 report_to="none", use_cpu=True)
        return PretrainTrainer(model, args, task.dataset["train"], task.dataset["validation"],
                               processing_class=task.tokenizer)

    with pytest.raises(UserInputError, match=r"--mlm_probability 0.01 .* about 0.32 masked tokens per training batch "
                                             r"of 2 rows, and the fixed validation masking holds [1-9]\d* masked"):
        trainer(0.01)
    assert (trainer(0.05).eval_dataset["labels"] is not None)
