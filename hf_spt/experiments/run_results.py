"""A run folder's results: `results.json` and the same table as `results.md`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .run_folder import write_json, write_text


def results_table(task_name: str, arms: list[dict[str, Any]]) -> str:
    """Markdown table of the arms' test and validation scores and times; with a LoRA arm, their trainable
    parameters too."""
    counts = any(arm.get("finetune_method") == "lora" for arm in arms)
    header = "| arm | test accuracy | validation accuracy |" + (" trainable parameters |" if counts else "")
    lines = [f"Task: {task_name}", "", header + " seconds |", "|---|---|---|" + ("---|" if counts else "") + "---|"]
    for arm in arms:
        trained = f" {arm['trainable_parameters']:,} of {arm['total_parameters']:,} |" if counts else ""
        lines.append(
            f"| {arm['arm']} | {arm.get('test_accuracy', float('nan')):.4f} "
            f"| {arm.get('eval_accuracy', float('nan')):.4f} |{trained} {arm['seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def write_results(output_dir: Path, task_name: str, arms: list[dict[str, Any]], extra: dict[str, Any]) -> None:
    """`results.json` ({"task", "arms": [...]}, plus run settings) and the same table as `results.md`."""
    output_dir.mkdir(parents=True, exist_ok=True)
    write_json(output_dir / "results.json", {"task": task_name, "arms": arms, **extra})
    write_text(output_dir / "results.md", results_table(task_name, arms))


__all__ = ["results_table", "write_results"]
