"""Shared fixtures: tiny configs (transformers' test sizes) and an offline Hub."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import builtins  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import hf_spt  # noqa: E402,F401  (registers the Auto classes)
from hf_spt import SptConfig  # noqa: E402

torch.set_num_threads(2)


def tiny_config(**overrides) -> SptConfig:
    """vocab 99, hidden 32, 2 layers, 4 heads: transformers' tiny test size."""
    values = dict(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        num_labels=3,
    )
    values.update(overrides)
    return SptConfig(**values)


@pytest.fixture
def config() -> SptConfig:
    return tiny_config()


def random_batch(batch: int = 3, length: int = 12, vocab: int = 99, seed: int = 0) -> dict[str, torch.Tensor]:
    """Token ids above the special range, right-padded to different lengths."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, vocab, (batch, length), generator=generator)
    mask = torch.ones(batch, length, dtype=torch.long)
    for row in range(1, batch):
        mask[row, length - 2 * row :] = 0
    ids = ids.masked_fill(mask == 0, 0)
    return {"input_ids": ids, "attention_mask": mask}


def enable_activation_checkpointing(model) -> None:
    """transformers' current name (`activation_checkpointing_enable`; `gradient_checkpointing_enable` is its
    deprecated alias in 5.24) where the installed version has it, the old one otherwise, as its Trainer does."""
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable()
    else:
        model.gradient_checkpointing_enable()


def activation_checkpointing_on(model) -> bool:
    """Whether the model checkpoints activations, under the installed transformers' name for it (as above)."""
    if hasattr(type(model), "is_activation_checkpointing"):
        return model.is_activation_checkpointing
    return model.is_gradient_checkpointing


def run_spt_cli(argv: list[str], capsys) -> tuple[int, str]:
    """The command `hf-spt run` (`hf_spt.scripts.run_spt.main`) on `argv`: (exit status, its error message on stderr:
    from the line starting "error:" to the end, or the last line; datasets' progress bars come first)."""
    from hf_spt.scripts import run_spt

    with pytest.raises(SystemExit) as exit_info:
        run_spt.main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    starts = [index for index, line in enumerate(lines) if line.startswith("error:")]
    return exit_info.value.code, "\n".join(lines[starts[-1]:] if starts else lines[-1:])


@pytest.fixture
def without_peft(monkeypatch):
    """`import peft` fails inside the test, as on a machine without the [peft] extra."""
    real_import = builtins.__import__

    def no_peft(name, *args, **kwargs):
        if name == "peft":
            raise ImportError("No module named 'peft'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_peft)


class CellRecorder:
    """Wraps the ablation grid's in-process `run_phase` to kill a run after some cells, then to record what a re-run
    trains: `done` and `rerun` hold the folders of the cells, `pretrained` those of the SPT jobs a re-run trained."""

    def __init__(self, monkeypatch):
        import hf_spt.experiments.suites.grid_runner as grid_runner

        self.grid_runner, self.monkeypatch, self.real = grid_runner, monkeypatch, grid_runner.run_phase
        self.done: list = []
        self.rerun: list = []
        self.pretrained: list = []

    def kill_after(self, count: int) -> None:
        """The next run stops (KeyboardInterrupt) once `count` cells have finished, as a killed run would."""
        def run_phase(phase, checked=False):
            if phase.arm is not None:
                if len(self.done) == count:
                    raise KeyboardInterrupt
                self.done.append(phase.folder)
            return self.real(phase, checked)

        self.monkeypatch.setattr(self.grid_runner, "run_phase", run_phase)

    def record_rerun(self) -> None:
        """The next run records every phase it trains (a finished one returns its result without training)."""
        def run_phase(phase, checked=False):
            if not (phase.folder / "phase.json").is_file():
                (self.rerun if phase.arm is not None else self.pretrained).append(phase.folder)
            return self.real(phase, checked)

        self.monkeypatch.setattr(self.grid_runner, "run_phase", run_phase)
