"""Task registry: a task name becomes a `datasets.DatasetDict`, its tokenizer and a preset.

Every task yields splits `train`, `validation` and `test` with an `input_ids` column (token ids
from the task's tokenizer, special tokens included) and a `labels` column. SPT reads the same
splits with `labels` dropped. A task module registers itself with `@register_task`, giving its
preset statically, so that sizes, batch and masking rate are known without building any data
(`task_preset`); a builder may still adjust the preset from its options (a generated task's length,
custom data's number of classes) with `dataclasses.replace`.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from datasets import DatasetDict
from transformers import PreTrainedTokenizerBase

from ..errors import UserInputError
from ..value_checks import declared_range, fits, type_words, value_problem

REQUIRED_SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class TaskPreset:
    """What published SPT work used for a task (Amos et al., arXiv 2310.02980, and the LRA paper); run options override it.

    `model` holds `SptConfig` keyword arguments (sizes, pooling); `mlm_probability` is the SPT
    masking rate (Amos et al.: 50% visual, 15% text and retrieval, 10% ListOps). Frozen: the
    registered preset is shared, so a change is a `dataclasses.replace` copy. In a registration,
    `None` for `max_length` or `num_labels` means "read off the data" (custom data).
    """

    max_length: int | None
    num_labels: int | None
    mlm_probability: float = 0.15
    batch_size: int = 32
    model: dict[str, Any] = field(default_factory=dict)


@dataclass
class Task:
    """A loaded task: data, tokenizer, preset, label names (index = label id), and notes on what building the
    data left out (skipped files), which every phase trained on it records in its `phase.json`."""

    name: str
    dataset: DatasetDict
    tokenizer: PreTrainedTokenizerBase
    preset: TaskPreset
    label_names: list[str] | None = None
    is_pair: bool = False
    data_notes: list[str] = field(default_factory=list)  # what building the data left out or drew on (skipped files, a source), for the phase records

    def id2label(self) -> dict[int, str]:
        names = self.label_names or [str(i) for i in range(self.preset.num_labels)]
        return dict(enumerate(names))


@dataclass
class TaskEntry:
    """A registered task: how to build it, and what it needs on disk (for `--list_tasks`)."""

    name: str
    builder: Callable[..., Task]
    description: str
    needs: str
    preset: TaskPreset


TASKS: dict[str, TaskEntry] = {}


def register_task(
    name: str, description: str, needs: str, preset: TaskPreset
) -> Callable[[Callable[..., Task]], Callable[..., Task]]:
    """Decorator registering `builder(data_dir=None, seed=0, **options) -> Task` under `name`, with its preset."""

    def decorate(builder: Callable[..., Task]) -> Callable[..., Task]:
        TASKS[name] = TaskEntry(name, builder, description, needs, preset)
        return builder

    return decorate


def task_preset(name: str) -> TaskPreset:
    """The registered preset of task `name` (its builder's default options), without building the task."""
    if name not in TASKS:
        raise UserInputError(f"Unknown task {name!r}. Known tasks: {', '.join(sorted(TASKS))} (run_spt.py --list_tasks).")
    return TASKS[name].preset


def load_task(name: str, data_dir: str | None = None, seed: int = 0, **options: Any) -> Task:
    """Build the task `name` (see `list_tasks()`); `options` go to its builder (sizes, lengths...)."""
    check_task_options(name, options)  # an unknown name or option fails here
    task = TASKS[name].builder(data_dir=data_dir, seed=seed, **options)
    check_task(task)
    return task


def task_option_names(entry: TaskEntry) -> list[str]:
    """The options a task's builder takes (its keyword parameters but data_dir and seed)."""
    parameters = inspect.signature(entry.builder).parameters.values()
    return [p.name for p in parameters if p.name not in ("data_dir", "seed") and p.kind is not p.VAR_KEYWORD]


def check_options(entry: TaskEntry, options: dict[str, Any]) -> None:
    """Check a task's options before any data is built, against what its builder's signature declares: an option it
    does not take is an error listing the valid ones (not a bare TypeError), and a value of the wrong type or
    outside the range its parameter declares (`Annotated[int, POSITIVE_INT]`) an error naming it."""
    if any(p.kind is p.VAR_KEYWORD for p in inspect.signature(entry.builder).parameters.values()):
        return
    valid = task_option_names(entry)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise UserInputError(f"Task {entry.name!r} has no option(s) {unknown} (--task_options); its options: "
                             f"{', '.join(valid)}.")
    hints = typing.get_type_hints(entry.builder, include_extras=True)
    wrong = []
    for name, value in options.items():
        hint = hints.get(name, Any)
        if not fits(value, hint):
            wrong.append(f"{name} {value!r}: must be {type_words(hint)}")
        elif problem := value_problem(name, value, declared_range(hint)):
            wrong.append(problem)
    if wrong:
        raise UserInputError(f"Task {entry.name!r}, --task_options: {'; '.join(wrong)}.")


def check_task_options(name: str, options: dict[str, Any]) -> None:
    """Task `name` exists and takes `options` (`check_options`), checked without building any data."""
    task_preset(name)
    check_options(TASKS[name], options)


def check_task(task: Task) -> None:
    """Fail early, naming the problem, when a task's data cannot feed both phases."""
    missing = [split for split in REQUIRED_SPLITS if split not in task.dataset]
    if missing:
        raise UserInputError(f"Task {task.name!r} has no {missing} split(s); it needs {list(REQUIRED_SPLITS)}.")
    for split in REQUIRED_SPLITS:
        data = task.dataset[split]
        if len(data) == 0:
            raise UserInputError(f"Task {task.name!r}: the {split!r} split is empty.")
        if "input_ids" not in data.column_names:
            raise UserInputError(f"Task {task.name!r}: the {split!r} split has no input_ids column.")


def list_tasks() -> str:
    """One line per registered task: name, description, and what it needs on disk."""
    width = max(len(name) for name in TASKS)
    return "\n".join(
        f"{entry.name:<{width}}  {entry.description}\n{'':<{width}}  needs: {entry.needs}" for entry in TASKS.values()
    )


__all__ = ["Task", "TaskPreset", "TaskEntry", "TASKS", "register_task", "task_preset", "load_task", "task_option_names",
           "check_options", "check_task_options", "check_task", "list_tasks"]
