"""What padding-free (packed) batches cost on CPU, where no varlen attention kernel exists.

On CPU the packed path runs SDPA with a block-diagonal mask over the whole packed row: it computes
the same outputs, but attends over (sum of lengths)^2 positions and keeps an N x N mask, where a
padded batch attends over batch x longest^2. This times one SPT MLM training step (forward +
backward) on the same rows both ways, steps alternating, and prints the ratio; the rows are one
batch of ListOps lengths, as length grouping would put them together (sorted, consecutive), or
drawn at random (`--random`).

Usage:
    python benchmarks/bench_packed_cpu.py                     # 8 rows, ListOps lengths, grouped
    python benchmarks/bench_packed_cpu.py --random --repetitions 3
"""

from __future__ import annotations

import argparse

import torch

from bench_real_tokens import sample_lengths
from benchmarking import median, time_alternating
from hf_spt import SptConfig, SptForMaskedLM


def step(model: SptForMaskedLM, batch: dict[str, torch.Tensor]) -> None:
    model.zero_grad(set_to_none=True)
    model(**batch).loss.backward()


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=8, help="Sequences per batch.")
    parser.add_argument("--random", action="store_true", help="A random batch (default: a length-grouped one).")
    parser.add_argument("--repetitions", type=int, default=5, help="Timed steps of each path (median).")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads.")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    pool = sample_lengths("listops", 50 * args.rows, seed=0)
    lengths = pool[: args.rows] if args.random else sorted(pool)[len(pool) // 2 : len(pool) // 2 + args.rows]
    generator = torch.Generator().manual_seed(0)
    rows = [torch.randint(4, 24, (n,), generator=generator) for n in lengths]
    labels = [torch.where(torch.rand(n, generator=generator) < 0.1, row, -100) for n, row in zip(lengths, rows)]
    padded = {"input_ids": torch.nn.utils.rnn.pad_sequence(rows, batch_first=True),
              "attention_mask": torch.nn.utils.rnn.pad_sequence([torch.ones(n, dtype=torch.long) for n in lengths],
                                                                batch_first=True),
              "labels": torch.nn.utils.rnn.pad_sequence(labels, batch_first=True, padding_value=-100)}
    packed = {"input_ids": torch.cat(rows)[None], "labels": torch.cat(labels)[None],
              "position_ids": torch.cat([torch.arange(n) for n in lengths])[None]}
    model = SptForMaskedLM(SptConfig(vocab_size=24, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=512, max_position_embeddings=2048, sparse_prediction=True))
    seconds = time_alternating({"padded": lambda: step(model, padded), "packed": lambda: step(model, packed)},
                               repetitions=args.repetitions)
    result = {"padded_s": median(seconds["padded"]), "packed_s": median(seconds["packed"]),
              "real_share_padded": sum(lengths) / (len(lengths) * max(lengths))}
    result["packed_over_padded_time"] = result["packed_s"] / result["padded_s"]
    print(f"lengths {min(lengths)}-{max(lengths)} ({'random' if args.random else 'grouped'}), "
          f"real share of the padded batch {result['real_share_padded']:.2f}: step padded {result['padded_s']:.3f} s, "
          f"packed (block mask) {result['packed_s']:.3f} s, packed/padded time {result['packed_over_padded_time']:.2f}")
    return result


if __name__ == "__main__":
    main()
