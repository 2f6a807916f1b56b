"""How a test starts CPU gloo ranks: `python -m accelerate.commands.launch` with the flags a one-machine CPU run needs.

Shared by every test that launches ranks, so each asks Accelerate for a free port (`--main_process_port 0`): under
`pytest -n 2` two such tests may run at once, and a study running beside the suite holds Accelerate's default 29500.
The caller sets `ACCELERATE_USE_CPU=1` in the child's environment.
"""

from __future__ import annotations


def gloo_launcher(ranks: int) -> list[str]:
    """The arguments after the Python executable that launch the script following them on `ranks` gloo ranks."""
    return ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(ranks), "--main_process_port", "0",
            "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
