"""Time and peak memory of loading only W_Q/W_K (`qk`) versus the whole model, from a ~500 MB checkpoint.

Usage:
    python benchmarks/bench_partial_loading.py            # builds a ~500 MB SptForMaskedLM checkpoint in a temp dir
    python benchmarks/bench_partial_loading.py --repeats 5

Each measurement runs in a fresh Python process (peak RSS from `resource.getrusage`, so one
load cannot inherit another's memory). Both sides build the same empty target model first;
"baseline" builds it and loads nothing, so the load's own cost is peak - baseline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MEASURE = r"""
import json, resource, sys, time, torch
torch.set_num_threads(1)
from hf_spt import SptConfig, SptForSequenceClassification
from hf_spt.training.parts import load_partial_weights
from safetensors.torch import load_file
folder, mode = sys.argv[1], sys.argv[2]
model = SptForSequenceClassification(SptConfig.from_pretrained(folder))
start = time.perf_counter()
if mode == "qk":
    load_partial_weights(model, folder, "qk")
elif mode == "full":
    model.load_state_dict(load_file(folder + "/model.safetensors"), strict=False)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def build_checkpoint(folder: Path) -> float:
    """Save an SptForMaskedLM of about 500 MB (fp32) and return its file size in MB."""
    import torch

    from hf_spt import SptConfig, SptForMaskedLM

    torch.manual_seed(0)
    config = SptConfig(vocab_size=1000, hidden_size=1024, num_hidden_layers=10, num_attention_heads=16,
                       intermediate_size=4096, max_position_embeddings=1024, num_labels=2)
    SptForMaskedLM(config).save_pretrained(folder)
    return (folder / "model.safetensors").stat().st_size / 2**20


def measure(folder: Path, mode: str) -> dict[str, float]:
    output = subprocess.run([sys.executable, "-c", MEASURE, str(folder), mode], capture_output=True, text=True,
                            check=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Fresh processes per mode (median reported).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        size = build_checkpoint(folder)
        results = {mode: [measure(folder, mode) for _ in range(args.repeats)] for mode in ("baseline", "qk", "full")}
    median = {mode: {k: statistics.median(r[k] for r in runs) for k in ("seconds", "peak_mb")}
              for mode, runs in results.items()}
    base = median["baseline"]["peak_mb"]
    print(f"checkpoint: {size:.0f} MB, {args.repeats} fresh processes per mode, medians\n")
    print("| load | seconds | peak RSS (MB) | peak above model alone (MB) |")
    print("|---|---|---|---|")
    for mode in ("qk", "full"):
        m = median[mode]
        print(f"| {mode} | {m['seconds']:.3f} | {m['peak_mb']:.0f} | {m['peak_mb'] - base:.0f} |")
    qk, full = median["qk"], median["full"]
    print(f"\nfull / qk: time x{full['seconds'] / qk['seconds']:.1f}, "
          f"extra memory x{(full['peak_mb'] - base) / max(qk['peak_mb'] - base, 1):.1f} "
          f"(model alone: {base:.0f} MB)")


if __name__ == "__main__":
    main()
