"""Tasks as `datasets.DatasetDict`s: the registry and the built-in tasks (importing registers them)."""

from . import markov  # noqa: F401  (registers the task)
from .registry import TASKS, Task, TaskPreset, check_task, list_tasks, load_task, register_task

__all__ = ["TASKS", "Task", "TaskPreset", "check_task", "list_tasks", "load_task", "register_task"]
