"""Shared pieces of the `benchmarks/bench_*.py` scripts: hf_spt against transformers' BERT.

Each benchmark builds an hf_spt model and a BERT model of the same size, dropout (0) and
attention implementation, feeds both the same batch, and times forward + backward steps in
alternation (the order flips every repetition), reporting medians. Figures are only ever
quoted as ratios hf_spt / BERT measured in the same run, because the machine is shared.

Peak memory (CPU): each measurement runs in a fresh Python process (`python -m
benchmarking SPEC`) that builds the model and batch, runs one tiny warm-up step (so
that library workspaces are allocated), resets the kernel's peak-RSS counter (writing "5" to
/proc/self/clear_refs resets VmHWM, Linux >= 4.0), runs ONE training step and reports
`VmHWM - RSS before the step`: the extra memory the step needed (activations kept for backward,
gradients, temporaries). The process sets glibc's `MALLOC_MMAP_THRESHOLD_` to 64 KiB so that
every large tensor is its own mapping, returned on free: RSS then follows live tensor bytes
instead of allocator caches. tracemalloc does not see torch's allocations, and an RSS sampler
can miss short peaks; the kernel's high-water mark cannot. On CUDA,
`torch.cuda.max_memory_allocated` is used instead.

FLOPs of one training step (forward + backward = 3 x forward), counted from the config
(d = hidden, f = intermediate, L = layers, T = length, B = batch, V = vocab, N = rows the LM
head projects: the masked tokens for hf_spt, all B*T tokens for BERT):
    forward = L * (2*B*T*(4*d*d + 2*d*f)  +  4*B*T*T*d)  +  2*N*(d*d + d*V)
(linear layers: 2 FLOPs per multiply-add; attention: Q K^T and P V, 2*T*d each per token).
Embedding look-ups, norms, softmax and activations are not counted.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

MODEL_KINDS = ("spt_mlm", "bert_mlm", "spt_cls", "bert_cls")
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}


@dataclass(frozen=True)
class BenchPreset:
    """Sizes of one benchmark setting; LRA presets follow the sizes used with SPT by Amos et al. (arXiv 2310.02980; FFN = d * multiplier)."""

    name: str
    length: int
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    mlm_probability: float
    batch_size: int


PRESETS = {
    "markov": BenchPreset("markov", 100, 20, 64, 1, 4, 128, 0.15, 32),
    "image": BenchPreset("image", 1024, 260, 64, 3, 4, 128, 0.5, 4),
    "pathfinder": BenchPreset("pathfinder", 1024, 260, 128, 4, 8, 128, 0.5, 4),
    "text": BenchPreset("text", 4096, 260, 512, 6, 8, 2048, 0.15, 1),
    "word": BenchPreset("word", 512, 32000, 256, 4, 4, 1024, 0.15, 8),
}
TINY = BenchPreset("tiny", 64, 40, 32, 1, 2, 64, 0.15, 2)


def resolve_preset(name: str, **overrides: Any) -> BenchPreset:
    """The preset `name` ("tiny" too) with every non-None override applied."""
    if name != "tiny" and name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}; choose from tiny, {', '.join(PRESETS)}.")
    preset = TINY if name == "tiny" else PRESETS[name]
    return replace(preset, **{k: v for k, v in overrides.items() if v is not None})


def build_model(kind: str, preset: BenchPreset, attn_implementation: str = "sdpa") -> torch.nn.Module:
    """hf_spt or BERT model (`kind` in MODEL_KINDS) of the preset's size, dropout 0, in train mode."""
    from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification

    from hf_spt import SptConfig
    from hf_spt import SptForMaskedLM, SptForSequenceClassification

    sizes = dict(
        vocab_size=preset.vocab_size,
        hidden_size=preset.hidden_size,
        num_hidden_layers=preset.num_layers,
        num_attention_heads=preset.num_heads,
        intermediate_size=preset.intermediate_size,
        max_position_embeddings=preset.length,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=2,
    )
    if kind.startswith("spt"):
        # sparse_prediction: masked-position logits only, as PretrainTrainer's training steps run it
        config, classes = SptConfig(**sizes, sparse_prediction=True), (SptForMaskedLM, SptForSequenceClassification)
    elif kind.startswith("bert"):
        config, classes = BertConfig(**sizes, type_vocab_size=1), (BertForMaskedLM, BertForSequenceClassification)
    else:
        raise ValueError(f"Unknown model kind {kind!r}; choose from {', '.join(MODEL_KINDS)}.")
    config._attn_implementation = attn_implementation
    model = classes[0](config) if kind.endswith("mlm") else classes[1](config)
    return model.train()


def padded_tokens(pad_fraction: float, length: int) -> int:
    """The [PAD] tokens ending every second row of a `make_batch` batch: `pad_fraction` of `length`, at least one
    when `pad_fraction` > 0 (1 / length of a length would round down to none for some lengths, and an unpadded batch
    takes the mask-free path a padded one is compared against)."""
    return max(1, int(pad_fraction * length)) if pad_fraction > 0 else 0


def make_batch(
    kind: str, preset: BenchPreset, seed: int = 0, device: str = "cpu", pad_fraction: float = 0.0
) -> dict[str, torch.Tensor]:
    """The same random batch for every model: ids, attention mask, and MLM or class labels (MLM: with the masked
    tokens' `masked_positions`, which `training_step` gives to hf_spt's model only).

    With `pad_fraction` > 0, every second row ends in that share of [PAD] tokens (id 0, mask 0), at least one
    (`padded_tokens`), as in a batch of unequal texts. A batch with no padded row has an all-ones mask on a CPU and none on an
    accelerator, as the trainers' collators give it (`omit_full_attention_mask`): eager and compiled models then
    read the same inputs (compiled transformers would keep an all-ones mask that eager drops).
    """
    generator = torch.Generator().manual_seed(seed)
    shape = (preset.batch_size, preset.length)
    input_ids = torch.randint(4, preset.vocab_size, shape, generator=generator)
    attention_mask = torch.ones(shape, dtype=torch.long)
    attention_mask[1::2, preset.length - padded_tokens(pad_fraction, preset.length) :] = 0
    input_ids = input_ids.masked_fill(attention_mask == 0, 0)
    batch = {"input_ids": input_ids, "attention_mask": attention_mask}
    if device != "cpu" and bool(attention_mask.all()):
        from hf_spt.training.collators import without_attention_mask

        batch = without_attention_mask(batch)
    if kind.endswith("mlm"):
        from hf_spt.training.collators import masked_positions

        masked = (torch.rand(shape, generator=generator) < preset.mlm_probability) & attention_mask.bool()
        batch["labels"] = input_ids.masked_fill(~masked, -100)
        batch["masked_positions"] = masked_positions(batch["labels"])  # as PretrainTrainer's collator gives SPT
    else:
        batch["labels"] = torch.randint(0, 2, (preset.batch_size,), generator=generator)
    return {name: tensor.to(device) for name, tensor in batch.items()}


def training_step(model: torch.nn.Module, batch: dict[str, torch.Tensor], autocast_dtype: torch.dtype | None = None) -> None:
    """One forward + backward (no optimizer step: it is the same for both models)."""
    model.zero_grad(set_to_none=True)
    device_type = batch["input_ids"].device.type
    from hf_spt import SptForMaskedLM

    if not isinstance(getattr(model, "_orig_mod", model), SptForMaskedLM):  # `_orig_mod`: a torch.compile'd model
        batch = {name: tensor for name, tensor in batch.items() if name != "masked_positions"}
    with torch.autocast(device_type, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
        loss = model(**batch).loss
    loss.backward()


def synchronize(device: str) -> None:
    """Wait for queued CUDA work, so that timings cover it (no-op on CPU)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_alternating(
    steps: dict[str, Callable[[], None]], repetitions: int, warmup: int = 1, device: str = "cpu"
) -> dict[str, list[float]]:
    """Seconds per call of each step function, interleaved (order reversed every repetition)."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    synchronize(device)
    names = list(steps)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for repetition in range(repetitions):
        for name in names if repetition % 2 == 0 else reversed(names):
            start = time.perf_counter()
            steps[name]()
            synchronize(device)
            seconds[name].append(time.perf_counter() - start)
    return seconds


def median(values: list[float]) -> float:
    """Median of repeated timings (robust to the other jobs of a shared machine)."""
    return statistics.median(values)


def training_flops(kind: str, preset: BenchPreset, num_masked: int | None = None) -> float:
    """FLOPs of one forward + backward step (formula in the module docstring)."""
    d, f, L, T, B, V = (preset.hidden_size, preset.intermediate_size, preset.num_layers, preset.length,
                        preset.batch_size, preset.vocab_size)
    forward = L * (2 * B * T * (4 * d * d + 2 * d * f) + 4 * B * T * T * d)
    if kind.endswith("mlm"):
        rows = num_masked if kind.startswith("spt") else B * T
        if rows is None:
            raise ValueError("training_flops needs num_masked for hf_spt's MLM head.")
        forward += 2 * rows * (d * d + d * V)
    return 3.0 * forward


def matmul_flops_per_second(size: int = 2048, repetitions: int = 5, device: str = "cpu",
                            dtype: torch.dtype = torch.float32) -> float:
    """The machine's practical peak: median FLOP/s of a (size x size) @ (size x size) matmul."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    seconds = time_alternating({"matmul": lambda: torch.matmul(a, b)}, repetitions, warmup=2, device=device)
    return 2.0 * size**3 / median(seconds["matmul"])


def _status_bytes(field: str) -> int:
    """A memory field of /proc/self/status (VmRSS: now, VmHWM: peak since the last reset), in bytes."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}: peak memory needs Linux.")


def _peak_step_bytes_here(spec: dict[str, Any]) -> int:
    """Inside the fresh process: extra peak RSS of one training step (see module docstring)."""
    torch.set_num_threads(spec["threads"])
    preset = BenchPreset(**spec["preset"])
    model = build_model(spec["kind"], preset, spec["attn_implementation"])
    tiny = replace(preset, batch_size=2, length=min(8, preset.length))
    training_step(model, make_batch(spec["kind"], tiny, pad_fraction=spec["pad_fraction"]))
    batch = make_batch(spec["kind"], preset, pad_fraction=spec["pad_fraction"])
    model.zero_grad(set_to_none=True)
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # reset the peak (VmHWM) to the current RSS
    before = _status_bytes("VmRSS")
    training_step(model, batch)
    return _status_bytes("VmHWM") - before


def peak_step_bytes(
    kind: str, preset: BenchPreset, attn_implementation: str = "sdpa", threads: int = 1, pad_fraction: float = 0.0
) -> int:
    """Extra peak memory (bytes) of one CPU training step, measured in a fresh subprocess."""
    spec = {"kind": kind, "preset": asdict(preset), "attn_implementation": attn_implementation, "threads": threads,
            "pad_fraction": pad_fraction}
    env = {**os.environ, **MALLOC_ENV}
    result = subprocess.run(
        [sys.executable, os.path.abspath(__file__), json.dumps(spec)],
        capture_output=True, text=True, env=env, check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"Memory measurement of {kind} at {preset.name} failed:\n{result.stderr[-2000:]}")
    return int(result.stdout.strip().splitlines()[-1])


def write_json(path: str | None, payload: dict[str, Any]) -> None:
    """Write the benchmark's results (with torch/transformers versions and thread count) to `path`, atomically:
    a script that writes after each part of its work leaves whole files when it is killed between them."""
    if not path:
        return
    import transformers

    from hf_spt.atomic_files import write_json as write_atomically

    write_atomically(path, {"torch": torch.__version__, "transformers": transformers.__version__,
                            "threads": torch.get_num_threads(), "load_average": os.getloadavg(), **payload})


def format_table(header: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table; floats get 3 significant digits."""
    def cell(value: Any) -> str:
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(_peak_step_bytes_here(json.loads(sys.argv[1])))
