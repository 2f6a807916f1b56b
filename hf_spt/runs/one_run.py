"""Whether phase folders are one run's: the check before a report puts them side by side.

A run folder can hold phases of different runs (an arm re-run with another seed, a pretraining redone after the
arms were fine-tuned); their recorded definitions (`phase_definition`) tell. `one_run_problems` lists why the
folders cannot be one run's, `check_one_run` refuses them with the way out.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UserInputError
from .phase_definition import definition_digest, read_definition


def one_run_problems(run: Path, folders: list[Path], seed: int) -> list[str]:
    """Why the phase folders (with their `phase_definition.json`) cannot be one run's: a seed other than the run's,
    fine-tuning arms on different data, an arm fine-tuned from another pretraining than the one analysed, or a
    pretraining (of the same task, that no arm starts from) on other data than the arms'."""
    definitions = {str(folder.relative_to(run)): found for folder in folders if (found := read_definition(folder))}
    problems = [f"{name} was trained with seed {d['seed']}, the run records seed {seed}"
                for name, d in definitions.items() if d["seed"] != seed]
    arms = {name: d for name, d in definitions.items() if d["phase"] != "pretrain"}
    pretraining = {name: d for name, d in definitions.items() if d["phase"] == "pretrain"}
    for split in sorted({split for d in arms.values() for split in d["data"]}):
        seen = {name: d["data"][split] for name, d in arms.items() if split in d["data"]}
        if len(set(seen.values())) > 1:
            problems.append(f"the arms read different {split} data ("
                            + ", ".join(f"{name} {value[:8]}" for name, value in seen.items()) + ")")
    digests = {definition_digest(d): name for name, d in pretraining.items()}
    sources = {(d.get("init_from") or {}).get("phase_definition") for d in arms.values()}
    for name, d in arms.items():
        source = (d.get("init_from") or {}).get("phase_definition")
        if pretraining and source is not None and source not in digests:
            problems.append(f"{name} was fine-tuned from another pretraining than {', '.join(pretraining)}")
    for name in (name for digest, name in digests.items() if digest not in sources):  # no arm vouches for it
        for arm, d in arms.items():
            if pretraining[name].get("task") != d.get("task"):
                continue
            changed = [split for split in ("train", "validation") if pretraining[name]["data"].get(split)
                       != d["data"].get(split)]
            if changed:
                problems.append(f"{name} pretrained on other {' and '.join(changed)} data than {arm}")
    return problems


def check_one_run(run: str | Path, folders: list[str], seed: int) -> None:
    """Refuse to report the phase folders of `run` together when they come from different runs (`one_run_problems`)."""
    problems = one_run_problems(Path(run), [Path(folder) for folder in folders], seed)
    if problems:
        raise UserInputError(
            f"--run {run}: its phase folders come from different runs, so one report would mix them: "
            f"{'; '.join(problems)}. Run the experiment again into a new --output_dir, or name the models with "
            "--model FOLDER... to analyse them together anyway.")


__all__ = ["one_run_problems", "check_one_run"]
