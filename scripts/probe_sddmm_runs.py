"""Probe the tiled SDDMM's runs of tiles per program on attention-like masks (H200/H100).

With one output tile per program, every tile reads its (BLOCK_M + BLOCK_N) x K operands from L2:
at 4096 x 4096, K = 128 and 128 x 64 tiles that is about 100 MB, several times the 33.5 MB the
dense product writes, so the kernel ran at 0.64x of dense at 95% zeros (BENCHMARKS.md 7c). With
``tiles_per_program`` > 1 and K in one step, a program reads its band of A once and only B's tile
per tile. This times, per problem (uniform random mask, ``PROBE_L`` x ``PROBE_L``, ``PROBE_KS`` x
``PROBE_SPARSITIES``, fp16): the dense cuBLAS product, stuning's own pick (``config=None``), and a
grid of one-step tiled configs (``PROBE_TILES``, ``PROBE_CHUNKS``) at each run length of
``PROBE_RUNS``. Every config is checked against a float64 reference first; timings are CUDA-graph
replays behind an L2 flush (``flushed_graph_us``).

    python3 scripts/probe_sddmm_runs.py            # $OUT/sddmm_runs_probe.json, a table last
    TRITON_INTERPRET=1 PROBE_SMOKE=1 python3 scripts/probe_sddmm_runs.py   # tiny, CPU
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_harness import attention_problems, sddmm_baseline_row, write_results  # noqa: E402
from probe_spmm_latency import SMOKE, timer  # noqa: E402

L = 64 if SMOKE else int(os.environ.get("PROBE_L", "4096"))
KS = [16] if SMOKE else [int(v) for v in os.environ.get("PROBE_KS", "64,128").split(",")]
SPARSITIES = [float(v) for v in os.environ.get("PROBE_SPARSITIES", "0.8,0.9,0.95,0.98").split(",")]
RUNS = [int(v) for v in os.environ.get("PROBE_RUNS", "1,2,4").split(",")]
CHUNKS = [int(v) for v in os.environ.get("PROBE_CHUNKS", "128,256,512,1024").split(",")]
TILES = [tuple(int(x) for x in v.split("x")) for v in os.environ.get("PROBE_TILES", "64x64,128x64,64x128").split(",")]
SECONDS = float(os.environ.get("PROBE_SECONDS", "400"))


def grid(k: int):
    """The space's one-step tiled configs (two stages, the chunks in CHUNKS and tiles in TILES), each
    at every run length in RUNS: the space's own validity rules, with runs it may not offer."""
    from stuning.kernels import sddmm as sddmm_kernel

    tiles = [(32, 32)] if SMOKE else TILES
    problem = sddmm_kernel.SDDMMProblem(L, L, k, L * L // 10, torch.float16)
    for cfg in sddmm_kernel.config_space(problem):
        if (cfg.kernel == "tiled" and cfg.tiles_per_program == 1 and cfg.block_k >= k and cfg.num_stages == 2
                and (SMOKE or cfg.chunk in CHUNKS) and (cfg.block_m, cfg.block_n) in tiles):
            for run in RUNS:
                yield dataclasses.replace(cfg, tiles_per_program=run)


def main() -> int:
    import stuning

    rows_out = []
    for p in attention_problems([L], KS, SPARSITIES, "cpu" if SMOKE else "cuda", seconds=SECONDS):
        mask, a, b, k, ref = p.mask, p.a, p.b, p.k, p.ref
        row = sddmm_baseline_row(p, SMOKE)
        times = []
        for cfg in grid(k):
            entry = {"config": dataclasses.asdict(cfg)}

            def run(cfg=cfg, mask=mask, a=a, b=b):
                return stuning.sddmm(mask, a, b, config=cfg).values

            try:
                got = run().double()
                err = (got - ref).norm() / max(ref.norm(), 1e-30)
                if not err < 1e-2:
                    raise AssertionError(f"relative error {err:.2e} against the float64 reference")
                entry["us"] = timer(run)
            except Exception as e:  # reported, not fatal
                entry["error"] = str(e).splitlines()[0][:200]
            times.append(entry)
        for run in RUNS:
            ok = [t for t in times if "us" in t and t["config"]["tiles_per_program"] == run]
            best = min(ok, key=lambda t: t["us"], default=None)
            name = f"run{run}"
            row[f"best_{name}_us"] = best["us"] if best else None
            row[f"best_{name}_config"] = best["config"] if best else None
        row["configs"] = times
        rows_out.append(row)
        print(json.dumps({k_: v for k_, v in row.items() if k_ != "configs"}), flush=True)

    write_results(rows_out, "sddmm_runs_probe.json")
    nan = float("nan")
    names = [f"run{run}" for run in RUNS]
    print(f"{'L':>5} {'K':>4} {'sparsity':>8} {'dense':>7} {'auto':>7} " + " ".join(f"{n[:9]:>9}" for n in names)
          + "   dense / best (same order)")
    for r in rows_out:
        best = [r[f"best_{name}_us"] or nan for name in names]
        print(f"{r['l']:>5} {r['k']:>4} {r['sparsity']:>8} {r['dense_us']:>7.1f} {r['auto_us']:>7.1f} "
              + " ".join(f"{t:>9.1f}" for t in best) + "   " + " ".join(f"{r['dense_us'] / t:>5.2f}" for t in best))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
