"""Summarise Nsight Compute's per-instruction stall samples: which SASS instructions a kernel's warps
wait at, and why.

``profile_kernels.py`` under ``ncu --section SourceCounters -o REPORT`` records, per SASS
instruction, how often a sampled warp stood there and the reason it was stalled. Export it with

    ncu -i REPORT.ncu-rep --page source --csv --print-source sass > sass.csv

and read it here (gzip is fine, as `benchmarks/h200-scatter-profile/ncu-sass.csv.gz` is stored):

    python3 scripts/ncu_source_stalls.py sass.csv [--top 25] [--regions 0:226,226:464,464:]

For each kernel in the export it prints the samples by stall reason, the ``--top`` instructions by
samples (their index in the kernel's listing, the SASS, the main reasons) and, with ``--regions``,
each range of instruction indices' share of the samples (a K loop's body against its prologue and
epilogue: read the ranges off the listing, ``--listing``). BENCHMARKS.md 8r was read this way.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
from dataclasses import dataclass, field

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


@dataclass
class KernelSamples:
    name: str
    sass: list[str] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    executed: list[int] = field(default_factory=list)
    reasons: list[dict[str, int]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.samples)

    def by_reason(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self.reasons:
            for reason, n in row.items():
                out[reason] = out.get(reason, 0) + n
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def share(self, start: int, stop: int | None) -> float:
        return sum(self.samples[start:stop]) / max(1, self.total)


def _int(text: str) -> int:
    try:
        return int(float(text.replace(",", "")))
    except ValueError:
        return 0


def read_export(text: str) -> list[KernelSamples]:
    """The kernels of an ``ncu --page source --csv --print-source sass`` export: each starts with a
    ``"Kernel Name",...`` line, then a header, then one line per instruction."""
    kernels: list[KernelSamples] = []
    header: list[str] | None = None
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "Kernel Name":
            kernels.append(KernelSamples(row[1] if len(row) > 1 else "?"))
            header = None
        elif row[0] == "Address":
            header = row
        elif kernels and header is not None:
            cells = dict(zip(header, row, strict=False))
            kernel = kernels[-1]
            kernel.sass.append(cells.get("Source", "").strip())
            kernel.samples.append(_int(cells.get(SAMPLES, "0")))
            kernel.executed.append(_int(cells.get(EXECUTED, "0")))
            # The reasons as sampled, issued or not ('stall_long_sb'; the '(Not Issued)' copies are left out).
            kernel.reasons.append({h.removeprefix("stall_"): _int(v) for h, v in cells.items()
                                   if h.startswith("stall_") and "Not Issued" not in h and _int(v)})
    return kernels


def parse_regions(text: str) -> list[tuple[int, int | None]]:
    """'0:226,226:464,464:' -> [(0, 226), (226, 464), (464, None)]."""
    out = []
    for part in filter(None, text.split(",")):
        start, _, stop = part.partition(":")
        out.append((int(start or 0), int(stop) if stop else None))
    return out


def report(kernel: KernelSamples, top: int, regions: list[tuple[int, int | None]]) -> str:
    lines = [f"== {kernel.name}: {len(kernel.sass)} instructions, {kernel.total} samples"]
    total = max(1, kernel.total)
    lines.append("   by reason: " + ", ".join(f"{r} {n / total:.0%}" for r, n in kernel.by_reason().items()
                                              if n / total >= 0.01))
    for start, stop in regions:
        lines.append(f"   instructions {start}:{'' if stop is None else stop}: {kernel.share(start, stop):.0%}")
    ranked = sorted(range(len(kernel.sass)), key=lambda i: -kernel.samples[i])[:top]
    for i in ranked:
        if not kernel.samples[i]:
            break
        why = ", ".join(f"{r} {n}" for r, n in sorted(kernel.reasons[i].items(), key=lambda kv: -kv[1])[:2])
        n = kernel.samples[i]
        lines.append(f"   {i:5d} {n:5d} {n / total:4.0%}  {kernel.sass[i][:60]:60s} {why}")
    return "\n".join(lines)


def listing(kernel: KernelSamples) -> str:
    """Every instruction: index, samples, times executed, SASS (to find a loop's bounds: the
    instructions executed once per step)."""
    return "\n".join(f"{i:5d} {s:5d} {e:8d} {t}" for i, (s, e, t) in
                     enumerate(zip(kernel.samples, kernel.executed, kernel.sass, strict=True)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("export", help="ncu --page source --csv --print-source sass output (.csv or .csv.gz)")
    ap.add_argument("--top", type=int, default=25, help="instructions to list per kernel")
    ap.add_argument("--regions", default="", help="instruction index ranges to total, e.g. 0:226,226:464,464:")
    ap.add_argument("--listing", action="store_true", help="print every instruction instead")
    args = ap.parse_args(argv)
    opener = gzip.open if args.export.endswith(".gz") else open
    with opener(args.export, "rt") as f:
        kernels = read_export(f.read())
    if not kernels:
        print(f"ncu_source_stalls.py: no kernel in {args.export}")
        return 1
    regions = parse_regions(args.regions)
    for kernel in kernels:
        print(listing(kernel) if args.listing else report(kernel, args.top, regions))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
