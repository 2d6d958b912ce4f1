"""scripts/ncu_source_stalls.py: Nsight Compute's per-instruction stall samples, read with no GPU."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import ncu_source_stalls as stalls  # noqa: E402

STORED = Path(__file__).resolve().parent.parent / "benchmarks" / "h200-scatter-profile" / "ncu-sass.csv.gz"
HEADER = ["Address", "Source", stalls.SAMPLES, "Warp Stall Sampling (Not-issued Samples)", stalls.EXECUTED,
          "stall_long_sb", "stall_barrier", "stall_long_sb (Not Issued)"]


def _export(kernels: dict[str, list[tuple[str, int, int, int]]]) -> str:
    """An export as ncu writes it: per kernel a name line, the header, then (SASS, executed, long_sb,
    barrier) per instruction, the all-samples column their sum."""
    lines = []
    for name, rows in kernels.items():
        lines += [f'"Kernel Name","{name}",', ",".join(f'"{h}"' for h in HEADER)]
        for i, (sass, executed, long_sb, barrier) in enumerate(rows):
            cells = [hex(0x1000 + 16 * i), f"      {sass}", long_sb + barrier, 0, executed, long_sb, barrier, long_sb]
            lines.append(",".join(f'"{c}"' for c in cells))
    return "\n".join(lines) + "\n"


def test_reads_every_kernel_and_totals_samples_by_reason_and_region():
    rng = random.Random(7)
    rows = {name: [(f"OP{i} R{i}", rng.randrange(1, 9000), rng.randrange(0, 50), rng.randrange(0, 50))
                   for i in range(rng.randrange(5, 40))] for name in ("_first_kernel", "_second_kernel")}
    kernels = stalls.read_export(_export(rows))
    assert [k.name for k in kernels] == list(rows)
    for kernel, want in zip(kernels, rows.values(), strict=True):
        assert kernel.sass == [r[0] for r in want]
        assert kernel.executed == [r[1] for r in want]
        assert kernel.total == sum(r[2] + r[3] for r in want)
        reasons = kernel.by_reason()
        # The '(Not Issued)' copy of a reason is not counted twice.
        assert reasons.get("long_sb", 0) == sum(r[2] for r in want)
        assert reasons.get("barrier", 0) == sum(r[3] for r in want)
        cut = len(want) // 2
        assert kernel.share(0, cut) + kernel.share(cut, None) == pytest.approx(1.0)
        assert kernel.share(0, cut) == pytest.approx(sum(r[2] + r[3] for r in want[:cut]) / max(1, kernel.total))


def test_report_ranks_the_most_sampled_instruction_first():
    rows = {"_k": [("LDC R1", 1, 0, 1), ("BRA 0x10", 8, 40, 0), ("BAR.SYNC 0x0", 8, 0, 7)]}
    (kernel,) = stalls.read_export(_export(rows))
    text = stalls.report(kernel, top=2, regions=stalls.parse_regions("0:1,1:"))
    body = text.splitlines()
    assert body[0] == "== _k: 3 instructions, 48 samples"
    assert "instructions 0:1: 2%" in text and "instructions 1:: 98%" in text
    ranked = [line.split()[0] for line in body if line.strip()[0].isdigit()]
    assert ranked == ["1", "2"]


def test_parse_regions():
    assert stalls.parse_regions("0:226,226:464,464:") == [(0, 226), (226, 464), (464, None)]
    assert stalls.parse_regions("") == []


@pytest.mark.skipif(not STORED.exists(), reason="the stored export of BENCHMARKS.md 8r is not in this checkout")
def test_stored_export_gives_the_shares_benchmarks_quotes(capsys):
    # BENCHMARKS.md 8r: at N = 16 the K loop (instructions 226-463) holds 61% of the samples.
    assert stalls.main([str(STORED), "--top", "3", "--regions", "226:464"]) == 0
    out = capsys.readouterr().out
    assert out.count("== _spmm_scatter_kernel") == 2
    assert "instructions 226:464: 61%" in out.split("== ")[1]
