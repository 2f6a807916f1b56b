"""The two-phase experiment: self-pretrain, fine-tune, and compare with training from scratch.

Output layout under `output_dir`:
    pretrain/   SPT phase: Trainer checkpoints, and the best-validation MLM model at its root
    spt/        fine-tuned from pretrain/ (arm "spt")
    scratch/    fine-tuned from random init (arm "scratch")
    results.json, results.md
Each phase folder ends with `phase.json` (its metrics); a re-run skips phases that have one
and resumes the others from their last checkpoint, so an interrupted run loses at most an epoch.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from datasets import Dataset
from transformers import set_seed
from transformers.trainer_utils import get_last_checkpoint

from .analysis.callback import ProximityCallback
from .arguments import DataArguments, ExperimentArguments, ModelArguments
from .checkpoints import resolve_model_folder
from .configuration_spt import SptConfig
from .finetune_config import FinetuneTrainingArguments
from .finetune_trainer import FinetuneTrainer
from .modeling_spt import SptForMaskedLM, SptForSequenceClassification
from .spt_config import SptTrainingArguments
from .spt_trainer import SptTrainer
from .tasks import Task, load_task

PHASE_RESULT_NAME = "phase.json"
SEQUENCE_COLUMNS = ("input_ids", "pair_input_ids")
PROXIMITY_PROBE_SIZE = 32


def fit_lengths(task: Task, max_length: int, truncation: bool) -> Task:
    """Check every sequence fits `max_length`; cut the longer ones only when `truncation` is asked."""
    for split, data in task.dataset.items():
        for column in (c for c in SEQUENCE_COLUMNS if c in data.column_names):
            longest = max(len(ids) for ids in data[column])
            if longest <= max_length:
                continue
            if not truncation:
                raise ValueError(
                    f"Task {task.name!r}, split {split!r}: {column} has sequences of up to {longest} tokens, "
                    f"longer than max_length={max_length}. Pass --truncation to cut them, or raise --max_length."
                )
            task.dataset[split] = task.dataset[split].map(
                lambda batch, c=column: {c: [ids[:max_length] for ids in batch[c]]},
                batched=True,
                desc=f"truncating {split}/{column} to {max_length}",
            )
            data = task.dataset[split]
    return task


def prepare_task(data_args: DataArguments, seed: int) -> Task:
    """Load the task named in `data_args` and make its sequences fit the model."""
    task = load_task(data_args.task, data_dir=data_args.data_dir, seed=seed, **(data_args.task_options or {}))
    max_length = data_args.max_length or task.preset.max_length
    task.preset.max_length = max_length
    return fit_lengths(task, max_length, data_args.truncation)


def build_config(task: Task, model_args: ModelArguments) -> SptConfig:
    """SptConfig from the task preset, with every explicitly given model argument on top."""
    sizes = dict(task.preset.model)
    for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "pooling"):
        if getattr(model_args, name) is not None:
            sizes[name] = getattr(model_args, name)
    tokenizer = task.tokenizer
    config = SptConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=task.preset.max_length,
        position_embedding_type=model_args.position_embedding_type,
        hidden_dropout_prob=model_args.hidden_dropout_prob,
        attention_probs_dropout_prob=model_args.attention_probs_dropout_prob,
        pad_token_id=tokenizer.pad_token_id,
        mask_token_id=tokenizer.mask_token_id,
        cls_token_id=tokenizer.cls_token_id,
        num_labels=task.preset.num_labels,
        id2label=task.id2label(),
        label2id={name: i for i, name in task.id2label().items()},
        two_tower=task.is_pair,
        **sizes,
    )
    config._attn_implementation = model_args.attn_implementation
    return config


def _trainer_kwargs(exp: ExperimentArguments, output_dir: Path, epochs: float, lr: float, batch: int) -> dict[str, Any]:
    kwargs = dict(
        output_dir=str(output_dir),
        seed=exp.seed,
        num_train_epochs=epochs,
        learning_rate=lr,
        per_device_train_batch_size=batch,
        per_device_eval_batch_size=batch,
        weight_decay=exp.weight_decay,
        warmup_steps=exp.warmup_steps,
        lr_scheduler_type=exp.lr_scheduler_type,
    )
    kwargs.update(exp.trainer_options or {})
    return kwargs


def _attach_probes(trainer, task: Task, exp: ExperimentArguments) -> None:
    """With --log_proximity, log proximity scores of the first validation inputs during training."""
    if exp.log_proximity:
        probe = task.dataset["validation"]["input_ids"][:PROXIMITY_PROBE_SIZE]
        ProximityCallback.attach(trainer, probe, every_n_steps=exp.proximity_every_n_steps)


def _finished(folder: Path) -> dict[str, Any] | None:
    result = folder / PHASE_RESULT_NAME
    return json.loads(result.read_text()) if result.is_file() else None


def _train(trainer, folder: Path) -> None:
    """Train, resuming from the folder's last checkpoint if an earlier run was interrupted."""
    last = get_last_checkpoint(str(folder)) if folder.is_dir() else None
    trainer.train(resume_from_checkpoint=last)


def _finish(trainer, folder: Path, result: dict[str, Any]) -> dict[str, Any]:
    trainer.save_model(str(folder))
    if trainer.is_world_process_zero():
        (folder / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
        (folder / PHASE_RESULT_NAME).write_text(json.dumps(result, indent=1))
    return result


def pretrain(task: Task, config: SptConfig, exp: ExperimentArguments, folder: Path) -> dict[str, Any]:
    """SPT phase: MLM on the task's training inputs; keeps the best-validation model in `folder`."""
    if (done := _finished(folder)) is not None:
        return done
    set_seed(exp.seed)
    model = SptForMaskedLM(config)
    args = SptTrainingArguments(
        mlm_probability=exp.mlm_probability or task.preset.mlm_probability,
        mask_replace_prob=exp.mask_replace_prob,
        random_replace_prob=exp.random_replace_prob,
        **_trainer_kwargs(exp, folder, exp.spt_epochs, exp.spt_learning_rate, exp.spt_batch_size or task.preset.batch_size),
    )
    trainer = SptTrainer(
        model, args, task.dataset["train"], task.dataset["validation"], processing_class=task.tokenizer
    )
    _attach_probes(trainer, task, exp)
    start = time.perf_counter()
    _train(trainer, folder)
    metrics = trainer.evaluate()
    return _finish(trainer, folder, {"phase": "pretrain", "eval_loss": metrics["eval_loss"],
                                     "seconds": time.perf_counter() - start})


def finetune(
    task: Task,
    config: SptConfig,
    exp: ExperimentArguments,
    folder: Path,
    arm: str,
    init_from: str | Path | None = None,
) -> dict[str, Any]:
    """Fine-tune a classifier (from `init_from`'s SPT weights, or from scratch) and test its best checkpoint."""
    if (done := _finished(folder)) is not None:
        return done
    set_seed(exp.seed)
    if init_from is None:
        model = SptForSequenceClassification(config)
    else:
        source = resolve_model_folder(init_from)
        heads = dict(num_labels=config.num_labels, id2label=config.id2label, label2id=config.label2id,
                     pooling=config.pooling, two_tower=config.two_tower)
        model = SptForSequenceClassification.from_pretrained(
            source, attn_implementation=config._attn_implementation, **heads
        )
    args = FinetuneTrainingArguments(
        **_trainer_kwargs(exp, folder, exp.finetune_epochs, exp.finetune_learning_rate,
                          exp.finetune_batch_size or task.preset.batch_size)
    )
    trainer = FinetuneTrainer(
        model, args, task.dataset["train"], task.dataset["validation"], processing_class=task.tokenizer
    )
    _attach_probes(trainer, task, exp)
    start = time.perf_counter()
    _train(trainer, folder)
    validation = trainer.evaluate()
    test = trainer.evaluate(task.dataset["test"], metric_key_prefix="test")
    result = {"arm": arm, "init_from": str(init_from) if init_from else None,
              "seconds": time.perf_counter() - start}
    result.update({k: v for k, v in {**validation, **test}.items() if k.endswith(("accuracy", "loss", "mse"))})
    return _finish(trainer, folder, result)


def results_table(task_name: str, arms: list[dict[str, Any]]) -> str:
    """Markdown table of the arms' test and validation scores and times."""
    lines = [f"Task: {task_name}", "", "| arm | test accuracy | validation accuracy | seconds |", "|---|---|---|---|"]
    for arm in arms:
        lines.append(
            f"| {arm['arm']} | {arm.get('test_accuracy', float('nan')):.4f} "
            f"| {arm.get('eval_accuracy', float('nan')):.4f} | {arm['seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def write_results(output_dir: Path, task_name: str, arms: list[dict[str, Any]], extra: dict[str, Any]) -> None:
    """`results.json` ({"task", "arms": [...]}, plus run settings) and the same table as `results.md`."""
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "results.json").write_text(json.dumps({"task": task_name, "arms": arms, **extra}, indent=1))
    (output_dir / "results.md").write_text(results_table(task_name, arms))


def run_experiment(data_args: DataArguments, model_args: ModelArguments, exp: ExperimentArguments) -> dict[str, Any]:
    """Run the phases `exp.mode` asks for and return (and write, on the main process) the results."""
    output_dir = Path(exp.output_dir)
    task = prepare_task(data_args, exp.seed)
    config = build_config(task, model_args)
    arms: list[dict[str, Any]] = []
    pretrain_result = None
    if exp.mode in ("compare", "spt"):
        pretrain_result = pretrain(task, config, exp, output_dir / "pretrain")
    if exp.mode in ("compare", "finetune"):
        init_from = exp.init_from or output_dir / "pretrain"
        arm = finetune(task, config, exp, output_dir / "spt", "spt", init_from=init_from)
        if pretrain_result is not None:
            arm = {**arm, "pretrain_seconds": pretrain_result["seconds"],
                   "seconds": arm["seconds"] + pretrain_result["seconds"]}
        arms.append(arm)
    if exp.mode in ("compare", "scratch"):
        arms.insert(0, finetune(task, config, exp, output_dir / "scratch", "scratch"))
    extra = {"mode": exp.mode, "seed": exp.seed, "model": config.to_diff_dict() | {"model_type": "spt"},
             "experiment": asdict(exp), "data": asdict(data_args)}
    if pretrain_result is not None:
        extra["pretrain"] = pretrain_result
    from accelerate import PartialState

    if PartialState().is_main_process:
        write_results(output_dir, task.name, arms, extra)
    return {"task": task.name, "arms": arms, **extra}


__all__ = ["prepare_task", "fit_lengths", "build_config", "pretrain", "finetune", "run_experiment",
           "results_table", "write_results"]
