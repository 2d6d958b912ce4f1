"""Suite cases -> result rows of ``stuning bench``: stuning's kernel against the vendor paths.

For every case, on random inputs generated on the device (seeded by the case's name), stuning runs
with its default heuristic config (``configs="heuristic"``, the untuned baseline) or with
``config=None`` (``"auto"``: the tuning database, then the cost model, then the heuristic; the
row records which). Every output, stuning's and each baseline's, is checked against the fp32 dense
product first; then the row is timed with one method (see ``stuning.bench.timer``). A row holds
the times, ``speedup_vs_X = time of X / time of stuning``, errors, bytes and the config used.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from stuning import suite
from stuning.bench import error_text
from stuning.bench.baselines import INPUTS, OP_BASELINES, TOLERANCE, CaseInputs
from stuning.bench.timer import RowTimer, time_row
from stuning.tuning.objective import relative_error

CONFIG_SOURCES = ("heuristic", "auto")
ORDERS = ("shuffle", "interleave", "suite")
# Small enough for Triton's interpreter (seconds in all), and touching every op, dtype and an odd N.
SMOKE_CASES = {
    "spmm": [
        suite.SpMMCase(64, 96, 16, 0.9, 0.0, "fp32"),
        suite.SpMMCase(64, 96, 20, 0.7, 0.4, "fp16"),
        suite.SpMMCase(48, 64, 16, 0.95, 0.4, "bf16"),
    ],
    "sddmm": [
        suite.SDDMMCase(64, 48, 32, 0.9, "fp32", "wgrad"),
        suite.SDDMMCase(32, 32, 16, 0.7, "fp16", "attention"),
        suite.SDDMMCase(48, 64, 24, 0.8, "bf16", "wgrad"),
    ],
    "semi24": [suite.Semi24Case(64, 128, 16, "fp16"), suite.Semi24Case(32, 64, 20, "bf16")],
}
MAX_ERRORS_IN_A_ROW = 5  # after this many, the device is likely in a bad state: stop


@dataclass(frozen=True)
class BenchSettings:
    configs: str = "heuristic"  # one of CONFIG_SOURCES
    pad_to: int = 4  # row padding of stuning's CSR matrices (the README's choice)
    seed: int = 0
    on_gpu: bool = False

    @property
    def device(self) -> str:
        return "cuda" if self.on_gpu else "cpu"


def select_cases(ops: list[str], *, preset: str = "quick", smoke: bool = False, filters: dict | None = None,
                 sample: int | None = None, limit: int | None = None, order: str = "shuffle",
                 seed: int = 0) -> list:
    """The cases of a preset (``filters``: the suite functions' keyword filters) or the smoke cases,
    in ``order``: op by op in suite order, or ops round-robin, each list shuffled (seeded) or not.
    Round-robin makes a run cut short by its time limit still cover every op."""
    filters = filters or {}
    if smoke:
        dtypes = filters.get("dtypes")
        per_op = {op: [c for c in SMOKE_CASES[op] if dtypes is None or c.dtype in dtypes] for op in ops}
    else:
        per_op = suite.preset(preset, ops, sample=sample, seed=seed, **filters)
    lists = [list(per_op.get(op, [])) for op in ops]
    if order == "shuffle":
        for i, cases in enumerate(lists):
            random.Random(seed * 1000 + i).shuffle(cases)
    if order == "suite":
        ordered = [c for cases in lists for c in cases]
    else:
        ordered = [cases[i] for i in range(max(map(len, lists), default=0)) for cases in lists if i < len(cases)]
    return ordered[:limit] if limit is not None else ordered


def choose_config(configs: str, inputs: CaseInputs) -> tuple[dict, object]:
    """({config, config_source} columns, the ``config=`` to pass). ``heuristic``: the kernel's default
    heuristic, passed explicitly; ``auto``: ``config=None``, recording what the library picks."""
    if configs == "heuristic":
        return {"config": json.dumps(inputs.heuristic.as_dict()), "config_source": "heuristic"}, inputs.heuristic
    from stuning.ops.selection import SELECTOR
    from stuning.tuning.session import key_for

    features = inputs.features()
    config, source = SELECTOR.choose(features, key_for(features))
    return {"config": json.dumps(config.as_dict()), "config_source": f"auto: {source}"}, None


def case_columns(case) -> dict:
    return {
        "op": case.op,
        "name": case.name,
        "dtype": case.dtype,
        "m": case.m,
        "k": case.k,
        "n": case.n,
        "sparsity": getattr(case, "sparsity", 0.5),
        "skew_cv": getattr(case, "skew_cv", 0.0),
        "family": getattr(case, "family", ""),
    }


def run_case(case, settings: BenchSettings, timer: RowTimer) -> dict:
    """One result row: correctness of every implementation first, then the times and ratios."""
    row = case_columns(case)
    t_row = time.perf_counter()
    seed = (zlib.crc32(case.name.encode()) + settings.seed) % 2**63
    gen = torch.Generator(device=settings.device).manual_seed(seed)
    inputs = INPUTS[case.op](case, device=settings.device, generator=gen, pad_to=settings.pad_to,
                             on_gpu=settings.on_gpu)
    row.update(inputs.info)
    columns, config = choose_config(settings.configs, inputs)
    row.update(columns)
    notes = dict(inputs.notes)
    run_stuning = inputs.run_stuning
    impls = {"stuning": lambda: run_stuning(config), **inputs.baselines}
    # Correctness first: stuning against the fp32 dense product (the kernels compile here).
    row["rel_err"] = relative_error(impls["stuning"](), inputs.reference)
    row["tol"] = TOLERANCE[case.dtype]
    row["ok"] = row["rel_err"] <= row["tol"]
    for name, fn in inputs.baselines.items():
        if fn is None:
            continue
        try:
            out = inputs.to_reference.get(name, lambda x: x)(fn())
            row[f"{name}_err"] = relative_error(out, inputs.reference)
            del out
        except Exception as e:
            impls[name] = None
            notes[name] = error_text(e)
    inputs.reference = None  # the timed calls need the memory more
    timing = time_row(timer, impls)
    row["timing"] = timing.method
    row["timing_note"] = timing.note
    row["time_us"] = t_s = timing.times_us.get("stuning")
    row["host_us"], row["probe_us"] = timing.probes.get("stuning", (None, None))
    for b in OP_BASELINES[case.op]:
        t_b = timing.times_us.get(b)
        row[f"{b}_us"] = t_b
        row[f"{b}_host_us"] = timing.probes.get(b, (None, None))[0]
        row[f"speedup_vs_{b}"] = (t_b / t_s) if (t_b and t_s) else None
        if b in notes:
            row[f"{b}_note"] = notes[b]
        elif b not in impls and not settings.on_gpu:
            row[f"{b}_note"] = "unavailable: needs CUDA (no GPU)"
    if "vendor_bytes" in row:
        row["vendor_bytes_ratio"] = row["vendor_bytes"] / row["dense_bytes"]
    row["bytes_ratio"] = row["format_bytes"] / row["dense_bytes"]
    row["seconds"] = time.perf_counter() - t_row
    return row


@dataclass
class RunOutcome:
    rows: list[dict]
    seconds: float
    stopped: str = ""  # why the run ended before its last case, if it did


def run_cases(cases: list, settings: BenchSettings, timer: RowTimer, *, max_seconds: float | None = None,
              on_start: Callable[[object], None] = lambda case: None,
              on_row: Callable[[dict], None] = lambda row: None,
              checkpoint: Callable[[list[dict], float], None] | None = None,
              checkpoint_every_s: float = 20.0) -> RunOutcome:
    """Run the cases in order. A case that raises becomes a row with its error; the run stops after
    ``max_seconds`` (no new case is started), after MAX_ERRORS_IN_A_ROW failures in a row, or on
    Ctrl-C, keeping what it has. ``checkpoint(rows, elapsed)`` is called every ``checkpoint_every_s``."""
    rows: list[dict] = []
    t0 = last_write = time.perf_counter()
    errors_in_a_row = 0
    stopped = ""
    try:
        for case in cases:
            elapsed = time.perf_counter() - t0
            if max_seconds and elapsed > max_seconds:
                stopped = f"stopped after {elapsed:.0f} s (--max-seconds): {len(rows)} of {len(cases)} cases done"
                break
            on_start(case)
            try:
                row = run_case(case, settings, timer)
                errors_in_a_row = 0
            except Exception as e:
                errors_in_a_row += 1
                row = {**case_columns(case), "ok": False, "error": error_text(e, 400)}
                if settings.on_gpu:
                    with contextlib.suppress(Exception):
                        torch.cuda.synchronize()
            rows.append(row)
            on_row(row)
            if errors_in_a_row >= MAX_ERRORS_IN_A_ROW:
                stopped = f"stopped: {MAX_ERRORS_IN_A_ROW} errors in a row (the device may be in a bad state)"
                break
            if checkpoint is not None and time.perf_counter() - last_write > checkpoint_every_s:
                checkpoint(rows, time.perf_counter() - t0)
                last_write = time.perf_counter()
    except KeyboardInterrupt:
        stopped = "interrupted"
    return RunOutcome(rows, time.perf_counter() - t0, stopped)


def environment(on_gpu: bool) -> dict:
    """The columns every row of a run shares: device and versions."""
    import triton

    env = {
        "device": torch.cuda.get_device_name() if on_gpu else "cpu (Triton interpreter)",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda or "",
        "cusparselt": "",
    }
    if on_gpu:
        with contextlib.suppress(Exception):
            env["cusparselt"] = str(torch.backends.cusparselt.version())
    return env
