"""Probe the gather SDDMM with A and B asked of L2 at its start (H200/H100).

At 98% zeros the attention rows run 3.0 us at L = 1024 and 4.1 us at L = 2048 (BENCHMARKS.md 8m),
where an empty launch measures 0.9 us (8r): a program waits for the mask's indices from DRAM, then
for the rows of A and columns of B they name, from DRAM again (the timer flushes L2). Here every
program first asks L2 for its share of A's and B's lines (``prefetch.global.L2``, no register
written), so the second wait is for L2. Per problem (uniform random L x L mask, fp16/bf16, B K
contiguous): the dense product, stuning's pick, and the pick (when it is a gather config) and the
cost model's best gather configs, each with and without the prefetch, checked against float64
first. CUDA-graph replays behind an L2 flush.

    python3 scripts/probe_sddmm_prefetch.py     # $OUT/sddmm_prefetch.json, a table last
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_harness import attention_problems, checked_time_us, sddmm_baseline_row, write_results  # noqa: E402

LS = [int(v) for v in os.environ.get("PROBE_LS", "1024,2048,4096").split(",")]
KS = [int(v) for v in os.environ.get("PROBE_KS", "64,128").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.9,0.95,0.98").split(",")]
TOP = int(os.environ.get("PROBE_TOP", "6"))


def gather_configs(p, pick):
    """The pick when it gathers, then the cost model's favourite gather configs."""
    from stuning.kernels import sddmm as sddmm_kernel

    from stuning.tuning.features import sddmm_features
    from stuning.tuning.registry import family
    from stuning.tuning.session import model_for, open_db, target_spec

    features = sddmm_features(p.mask, p.k, p.a.dtype)
    space = [c for c in family("sddmm").space(features, None) if c.kernel == "gather"]
    ranked = [c for c, _ in model_for(open_db(), target_spec()).rank(features, space)]
    out = [pick] if pick.kernel == "gather" else []
    out += [c for c in ranked if c not in out][:TOP]
    return [sddmm_kernel.SDDMMConfig(**dataclasses.asdict(c)) for c in out]


def main() -> None:
    from stuning.kernels import sddmm as sddmm_kernel

    from stuning.ops.inputs import tuned_config
    from stuning.tuning.features import sddmm_features

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[os.environ.get("PROBE_DTYPE", "fp16")]
    rows = []
    for p in attention_problems(LS, KS, SPARSITIES, "cuda", dtype=dtype):
        row = sddmm_baseline_row(p, False)
        pick = tuned_config(p.mask, "sddmm", p.k, p.a.dtype, lambda p=p: sddmm_features(p.mask, p.k, p.a.dtype))
        rows_ids, col = p.mask.row_ids(), p.mask.col
        times = {}
        for cfg in gather_configs(p, pick):
            for prefetch in (False, True):
                run = functools.partial(sddmm_kernel.sddmm, rows_ids, col, p.mask.values, p.a, p.b, alpha=1.0,
                                        beta=0.0, config=cfg, prefetch=prefetch)
                times[(cfg, prefetch)] = checked_time_us(run, p.ref, f"{cfg} prefetch={prefetch}", checks=2)
        for prefetch in (False, True):
            timed = {c: t for (c, pf), t in times.items() if pf == prefetch and isinstance(t, float)}
            best = min(timed, key=timed.get, default=None)
            row[f"gather_{'pf' if prefetch else 'plain'}_us"] = timed.get(best)
            row[f"gather_{'pf' if prefetch else 'plain'}_config"] = dataclasses.asdict(best) if best else None
        if pick.kernel == "gather":
            row["pick_plain_us"], row["pick_pf_us"] = times[(pick, False)], times[(pick, True)]
        row["failed"] = [f"{c} {pf}: {t}" for (c, pf), t in times.items() if not isinstance(t, float)]
        row["pairs"] = [[dataclasses.asdict(c), times[(c, False)], times[(c, True)]] for c, pf in times if not pf]
        print({k: v for k, v in row.items() if k not in ("pairs",)}, flush=True)
        rows.append(row)
        write_results(rows, "sddmm_prefetch.json")
    print("\n| L | K | zeros | dense | pick (kernel) | gather plain | gather prefetch | plain / prefetch |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['l']} | {r['k']} | {r['sparsity']:.0%} | {r['dense_us']:.2f} | {r['auto_us']:.2f} "
              f"({r['pick']['kernel']}) | {r['gather_plain_us']:.2f} | {r['gather_pf_us']:.2f} | "
              f"{r['gather_plain_us'] / r['gather_pf_us']:.3f}x |")


if __name__ == "__main__":
    main()
