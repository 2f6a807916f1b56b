"""Tasks as `datasets.DatasetDict`s: the registry and the built-in tasks (importing registers them)."""

from . import custom, digits, image, listops, markov, mnist, pathfinder, retrieval, text  # noqa: F401  (registers the tasks)
from .registry import TASKS, Task, TaskPreset, check_task, list_tasks, load_task, register_task, task_preset

__all__ = ["TASKS", "Task", "TaskPreset", "check_task", "list_tasks", "load_task", "register_task", "task_preset"]
