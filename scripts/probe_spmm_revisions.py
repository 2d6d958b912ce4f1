"""Time the SpMM launchers of other revisions against the working tree's, in one process.

Kernel changes that move a few percent need an A/B in the same run: the benches of two device
calls differ by that much on their own. Each revision is a folder holding its ``spmm.py`` and
``spmm_sell.py`` (``git show REV:kernels/spmm.py``); this swaps their launchers into
``stuning.kernels`` in turn and times the library's pick for each problem, rounds interleaved,
checked against a float64 reference first.

    mkdir -p /tmp/base && for f in spmm spmm_sell; do git show c483295:kernels/$f.py > /tmp/base/$f.py; done
    PROBE_REVS=base=/tmp/base python3 scripts/probe_spmm_revisions.py   # $OUT/spmm_revisions.json
    TRITON_INTERPRET=1 PROBE_SMOKE=1 PROBE_REVS=base=/tmp/base python3 scripts/probe_spmm_revisions.py
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import statistics
import sys

import torch
from probe_harness import check_close, probe_time_us, spmm_problems, write_results

SMOKE = os.environ.get("PROBE_SMOKE", "0") != "0"
REVS = [r.split("=", 1) for r in os.environ.get("PROBE_REVS", "").split(",") if r]
SHAPES = ["64x64"] if SMOKE else os.environ.get("PROBE_SHAPES", "4096x4096,11008x4096,3072x768").split(",")
CASES = os.environ.get("PROBE_CASES", "fp16:16:0.9,fp16:16:0.95,fp16:128:0.9,fp16:128:0.98,fp16:2048:0.98,"
                                      "fp32:128:0.8,fp32:2048:0.8")
ROUNDS = 1 if SMOKE else int(os.environ.get("PROBE_ROUNDS", "3"))
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def load(name: str, folder: str) -> dict:
    """The two launchers of the revision in ``folder``, imported under names of their own."""
    launchers = {}
    for module, launcher in (("spmm", "spmm"), ("spmm_sell", "spmm_sell")):
        spec = importlib.util.spec_from_file_location(f"rev_{name}_{module}", os.path.join(folder, f"{module}.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # its dataclasses look their module up there
        spec.loader.exec_module(mod)
        launchers[module] = getattr(mod, launcher)
    return launchers


def use(launchers: dict) -> None:
    from stuning.kernels import spmm, spmm_sell

    spmm.spmm = launchers["spmm"]
    spmm_sell.spmm_sell = launchers["spmm_sell"]


def main() -> int:
    from stuning.kernels import spmm, spmm_sell

    import stuning

    revisions = {"head": {"spmm": spmm.spmm, "spmm_sell": spmm_sell.spmm_sell}}
    revisions.update({name: load(name, folder) for name, folder in REVS})
    device = "cpu" if SMOKE else "cuda"
    rows = []
    for shape in SHAPES:
        m, k = (int(v) for v in shape.split("x"))
        for case in CASES.split(","):
            dname, n, sparsity = case.split(":")
            dtype, n, sparsity = DTYPES[dname], (16 if SMOKE else int(n)), float(sparsity)
            tol = 1e-5 if dtype == torch.float32 else 1e-2
            p = next(spmm_problems(m, k, [n], [sparsity], device, dtype=dtype))
            run = functools.partial(stuning.spmm, p.a, p.x, config=p.pick)
            times = {name: [] for name in revisions}
            for _ in range(ROUNDS):
                for name, launchers in revisions.items():
                    use(launchers)
                    check_close(run(), p.ref, f"{shape} {case} {name}", tol)
                    times[name].append(probe_time_us(run, SMOKE))
            row = {"shape": shape, "dtype": dname, "n": n, "sparsity": sparsity, "pick": p.pick.as_dict(),
                   "us": {name: statistics.median(t) for name, t in times.items()}, "rounds": times}
            rows.append(row)
            print(json.dumps({key: row[key] for key in ("shape", "dtype", "n", "sparsity", "us")}), flush=True)
            write_results(rows, "spmm_revisions.json")
    use(revisions["head"])
    names = list(revisions)
    print(f"{'shape':>11} {'case':>16} " + " ".join(f"{name:>9}" for name in names) + "  ratios to head")
    for r in rows:
        us = r["us"]
        ratios = " ".join(f"{us[name] / us['head']:.2f}" for name in names[1:])
        cells = " ".join(f"{us[name]:>9.1f}" for name in names)
        print(f"{r['shape']:>11} {r['dtype']}:{r['n']}:{r['sparsity']:<5} {cells}  {ratios}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
