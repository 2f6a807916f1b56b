"""Time byte-level encoding of Retrieval-sized documents: hf_spt's numpy path vs the byte tokenizer.

Both give the same ids (tests/test_tasks_data.py checks it); the tasks use the numpy path.

    python benchmarks/bench_byte_encoding.py [--documents 500] [--max_length 4000]
"""

from __future__ import annotations

import argparse
import time

from hf_spt.tasks.common import byte_ids
from hf_spt.models.tokenization_spt import build_byte_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=500)
    parser.add_argument("--max_length", type=int, default=4000)
    args = parser.parse_args()
    sentence = "We parse the ACL Anthology network; citations, résumés and naïve baselines follow. "
    texts = [(sentence * 120)[k % 50 :] for k in range(args.documents)]
    tokenizer = build_byte_tokenizer()
    start = time.perf_counter()
    reference = tokenizer(texts, truncation=True, max_length=args.max_length)["input_ids"]
    tokenizer_seconds = time.perf_counter() - start
    start = time.perf_counter()
    ours = [byte_ids(text, args.max_length) for text in texts]
    numpy_seconds = time.perf_counter() - start
    assert ours == reference
    print(f"{args.documents} documents of {len(texts[0].encode())} bytes, cut at {args.max_length}")
    print(f"byte tokenizer (PreTrainedTokenizerFast): {tokenizer_seconds * 1000 / args.documents:8.3f} ms/document")
    print(f"hf_spt numpy byte ids:                    {numpy_seconds * 1000 / args.documents:8.3f} ms/document")
    print(f"ratio:                                    {tokenizer_seconds / numpy_seconds:8.1f}x")


if __name__ == "__main__":
    main()
