"""Re-tune the example models' problems on this GPU, seeded by the databases on the search path.

What refreshes the shipped database: each problem whose stored entry is missing, predicted, or timed
by an older timer (with ``--refresh``: every problem) is searched again, the stored configs timed
first (as seeds), and the results go
to $STUNING_DB_DIR (required, so the shipped file is never written in place); merge them with
``stuning db merge`` after reviewing them.

    STUNING_DB_DIR=/tmp/sdb python3 scripts/retune_examples.py --models llama-mlp,bert --sparsities 0.9,0.95 \
        --tokens 16,128 --seconds 8
"""

from __future__ import annotations

import argparse
import os


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="llama-mlp,bert", help="comma list of: bert, llama-mlp")
    ap.add_argument("--sparsities", default="0.9,0.95", help="fractions of zeros (CSR) and/or 2:4")
    ap.add_argument("--tokens", default="16,128", help="tokens per forward (the N of each layer)")
    ap.add_argument("--seconds", type=float, default=8.0, help="time limit per problem")
    ap.add_argument("--refresh", action="store_true",
                    help="search current entries again too (after a config space grew), their configs first")
    args = ap.parse_args(argv)
    if not os.environ.get("STUNING_DB_DIR"):
        raise SystemExit("retune_examples.py: set STUNING_DB_DIR (where the re-tuned entries go)")

    import torch

    import stuning
    from stuning.nn import examples
    from stuning.tuning.search import Budget

    builders = {"bert": examples.bert_encoder, "llama-mlp": examples.llama_mlp}
    unknown = set(args.models.split(",")) - set(builders)
    if unknown:
        raise SystemExit(f"retune_examples.py: unknown model(s) {sorted(unknown)}; use bert, llama-mlp")
    for name in args.models.split(","):
        for pattern in args.sparsities.split(","):
            model = builders[name](dtype=torch.float16, device="cuda")
            if pattern == "2:4":
                stuning.sparsify(model, sparsity=0.5, pattern="2:4", min_size=0)
            else:
                stuning.sparsify(model, sparsity=float(pattern), min_size=0)
            report = stuning.pretune(model, tokens=[int(t) for t in args.tokens.split(",")],
                                     budget=Budget(max_seconds=args.seconds), refresh=args.refresh)
            print(f"{name} {pattern}: tuned {report.tuned}, skipped {report.skipped}, failed {report.failed} "
                  f"in {report.seconds:.0f} s", flush=True)
            for p in report.problems:
                print(f"  {p.op} {p.shape} n={p.tokens}: {p.status} {p.time_us} us (dense {p.dense_us} us)")


if __name__ == "__main__":
    main()
