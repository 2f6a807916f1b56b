"""A run's settings are resolved once, at the top (issue 49): only the commands, the parser and the resolver take
a command-line argument group; everything below reads the resolved `run_spec.RunSpec`."""

import ast
from pathlib import Path

import hf_spt

GROUPS = ("DataArguments", "ModelArguments", "ExperimentArguments", "SharedTrainingArguments")
READERS = {
    "scripts/run_spt.py:run", "scripts/run_analysis.py:run",  # the commands, on their parsed flags
    "experiments/command_line.py:check_all_read",  # the parser: no flag the run does not read
    "experiments/run_spec.py:resolve_run", "experiments/run_spec.py:task_requests",  # the resolver
    "experiments/pipeline.py:run_experiment",  # run_spt.py's run from its groups, resolved at once
    "experiments/suites/analysis_run.py:analyse", "experiments/suites/analysis_run.py:grid_cells",  # the analysis
}
"""The functions that may take an argument group: at most 8."""


def group_readers() -> set[str]:
    """Every function of the package with a parameter annotated with an argument group."""
    root = Path(hf_spt.__file__).parent
    readers = set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            if any(a.annotation is not None and any(g in ast.unparse(a.annotation) for g in GROUPS) for a in arguments):
                readers.add(f"{path.relative_to(root).as_posix()}:{node.name}")
    return readers


def test_only_the_top_reads_the_argument_groups():
    assert len(READERS) <= 8
    assert group_readers() == READERS


def test_the_plan_holds_no_argument_group():
    from hf_spt.experiments.phases import PlannedPhase
    from hf_spt.experiments.run_spec import ModelSpec, PhaseSpec, RunSpec, TaskRequest

    for spec in (PlannedPhase, RunSpec, PhaseSpec, ModelSpec, TaskRequest):
        annotations = " ".join(str(a) for a in spec.__annotations__.values())
        assert not any(group in annotations for group in GROUPS), spec


def test_the_phase_arguments_own_the_device_defaults(tmp_path, monkeypatch):
    """A library user's `PretrainArguments`/`FinetuneArguments` get what a run gets: on an accelerator, pinned
    memory, non-blocking copies and widths a multiple of 8; on a CPU none of them; a value given wins."""
    import pytest

    import hf_spt.training.arguments as arguments
    from hf_spt.errors import UserInputError

    for phase_arguments in (arguments.PretrainArguments, arguments.FinetuneArguments):
        on_cpu = phase_arguments(output_dir=str(tmp_path), use_cpu=True)
        assert (on_cpu.dataloader_pin_memory, on_cpu.pad_to_multiple_of, on_cpu.accelerator_config.non_blocking) == (
            False, None, False)
        with pytest.raises(UserInputError, match="--fp16 needs a GPU"):
            phase_arguments(output_dir=str(tmp_path), use_cpu=True, fp16=True)
        with monkeypatch.context() as patched:
            patched.setattr(arguments, "accelerator_available", lambda args: True)
            built = phase_arguments(output_dir=str(tmp_path))
            given = phase_arguments(output_dir=str(tmp_path), pad_to_multiple_of=64, dataloader_pin_memory=False)
        assert (built.dataloader_pin_memory, built.pad_to_multiple_of, built.accelerator_config.non_blocking) == (
            True, arguments.GPU_PAD_MULTIPLE, True)
        assert (given.dataloader_pin_memory, given.pad_to_multiple_of) == (False, 64)
