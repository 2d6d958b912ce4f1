"""Probe a cap on registers per thread for the sliced-ELL SpMM picks (fp16).

Under Nsight Compute (BENCHMARKS.md 7q) the fp16 sliced-ELL picks hold 96-125 registers per thread,
which limits them to 24-31% occupancy, and their warps spend most cycles waiting on the L1
(long scoreboard) with no unit full: latency, not throughput. Fewer registers would let more warps
hide it, at the price of spills. Triton's ``maxnreg`` launch option sets the cap; this times the
library's pick's tiles (in ``probe_spmm_f16_partial``'s kernel with fp32 accumulation, the same
code as the library's) at each cap of ``PROBE_MAXNREG`` and uncapped, with 2, 4 and 8 warps, each
checked against a float64 reference.

    python3 scripts/probe_spmm_maxnreg.py          # $OUT/spmm_maxnreg_probe.json, a table last
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_spmm_maxnreg.py   # tiny, CPU
"""

from __future__ import annotations

import json
import os

from probe_harness import check_close, probe_time_us, spmm_baseline_row, spmm_problems, write_results
from probe_spmm_f16_partial import sell_run

SMOKE = os.environ.get("PROBE_SMOKE", "0") != "0"
NS = [16] if SMOKE else [int(v) for v in os.environ.get("PROBE_NS", "2048,128").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.9,0.95,0.98").split(",")]
CAPS = [None] + [int(v) for v in os.environ.get("PROBE_MAXNREG", "56,64,80").split(",")]
M, K = (64, 64) if SMOKE else (4096, 4096)


def main() -> int:
    device = "cpu" if SMOKE else "cuda"
    rows_out = []
    for p in spmm_problems(M, K, NS, SPARSITIES, device):
        n, a, x, pick = p.n, p.a, p.x, p.pick
        row = {**spmm_baseline_row(p, SMOKE), "runs": []}
        if pick.kernel != "sell" and not SMOKE:
            continue
        tiles = (4, 4, 16, 8) if SMOKE else (pick.rows, pick.nnz_step, pick.block_n, pick.vec)
        for warps in sorted({2, 4, 8, pick.num_warps}):
            for cap in CAPS:
                run = sell_run(a, x, *tiles, warps, 0, swizzle=pick.swizzle, maxnreg=None if SMOKE else cap)
                check_close(run(), p.ref, f"n={n} {tiles} w{warps} maxnreg={cap}")
                row["runs"].append({"warps": warps, "maxnreg": cap, "us": probe_time_us(run, SMOKE)})
        same = [r["us"] for r in row["runs"] if r["maxnreg"] is None and r["warps"] == pick.num_warps]
        capped = min((r for r in row["runs"] if r["maxnreg"] is not None), key=lambda r: r["us"])
        row.update(uncapped_us=same[0], capped_us=capped["us"], capped=capped, gain=same[0] / capped["us"])
        rows_out.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
    write_results(rows_out, "spmm_maxnreg_probe.json")
    print(f"{'n':>5} {'zeros':>6} {'cuBLAS':>7} {'pick':>7} {'uncapped':>9} {'best cap':>9} {'cap':>4} {'warps':>5} "
          f"{'gain':>5}")
    for r in rows_out:
        c = r["capped"]
        print(f"{r['n']:>5} {r['sparsity']:>6} {r['cublas_us']:>7.1f} {r['pick_us']:>7.1f} {r['uncapped_us']:>9.1f} "
              f"{r['capped_us']:>9.1f} {c['maxnreg']:>4} {c['warps']:>5} {r['gain']:>5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
