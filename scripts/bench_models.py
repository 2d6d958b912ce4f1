#!/usr/bin/env python3
"""End-to-end models: stuning's SparseLinear against the dense model and PyTorch's sparse paths.

Two models built in code (stuning/nn/examples.py, random weights): a BERT-base-sized encoder (12
layers, hidden 768, FFN 3072; input batches of 128-token sequences) and a Llama-7B MLP block (4096 ->
11008 -> 4096). Each is magnitude-pruned per layer to every ``--sparsities`` entry (fractions for
unstructured CSR, ``2:4`` for semi-structured) with ``stuning.sparsify``, pretuned with
``stuning.pretune`` at every ``--tokens`` count into ``OUT/db``, starting from the shipped database
as a user's pretune does (its current entries answer, older ones seed; ``--fresh-db``: from nothing;
wall time, problems tuned and the database's size recorded), and then the forward pass is timed at
each token count for:

* ``dense``: the model with the pruned weights stored dense (cuBLAS);
* ``stuning``: the same model after ``sparsify`` (Triton kernels, configs from the pretuned database);
* ``cusparse``: the same sparse weights through PyTorch's sparse CSR product (``SparseLinear(backend="torch")``);
* ``cslt``: 2:4 only, each ``nn.Linear`` weight replaced by ``torch.sparse.to_sparse_semi_structured(W)``
  (cuSPARSELt, or CUTLASS where torch has no cuSPARSELt).

Every output is checked against the fp32 forward of the dense model with the same zeros (relative
Frobenius error; ``ok`` is stuning's against ``MODEL_TOLERANCE``). Timing follows stuning/bench/timer.py:
one method per row, ``do_bench`` medians, or CUDA-graph replays where a path is launch-bound. Writes
``results.csv``, ``summary.md`` and ``speedup.png`` under ``--out`` and prints a short table last.

    python3 scripts/bench_models.py --out OUT                        # full run on a GPU
    python3 scripts/bench_models.py --out OUT --tokens 16,128,1024,8192 --trials 4 --seconds 2   # shorter
    python3 scripts/bench_models.py --smoke --out /tmp/bm            # tiny models, CPU interpreter

Pretune is resumable: run again with the same ``--out`` and the problems already in ``OUT/db`` are
skipped (``pretune_skipped``), so a run cut short costs only what it had not finished.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

# Rows of 64 keep a few nonzeros at 95% sparsity, as real weights do (32 would leave one or two).
SMOKE_SIZES = {"bert": {"layers": 1, "hidden": 64, "heads": 2, "ffn": 128},
               "llama-mlp": {"hidden": 64, "intermediate": 128}}
SEQUENCE = 128  # inputs: batches of sequences this long, or one sequence of the token count
# Relative Frobenius error of a whole forward against the fp32 one: several layers of fp16/bf16
# rounding, LayerNorms and residuals add up beyond a single product's tolerance.
MODEL_TOLERANCE = {"fp16": 1e-2, "bf16": 4e-2, "fp32": 1e-4}
# fallback: stuning's model with dense_fallback on (a dense copy where pretune timed dense faster).
IMPLS = ("dense", "stuning", "fallback", "cusparse", "cslt")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="results directory (its db/ holds the pretuned database)")
    ap.add_argument("--models", default="bert,llama-mlp", help="comma list of: bert, llama-mlp")
    ap.add_argument("--sparsities", default="0.7,0.9,0.95,2:4", help="fractions of zeros (CSR) and/or 2:4")
    ap.add_argument("--tokens", default="16,128,512,2048,8192", help="tokens per forward (batch x sequence)")
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    ap.add_argument("--strategy", default="model+optuna", choices=["model", "model+optuna", "exhaustive"])
    ap.add_argument("--trials", type=int, default=8, help="pretune: configs timed per problem")
    ap.add_argument("--seconds", type=float, default=10.0, help="pretune: time limit per problem")
    ap.add_argument("--fresh-db", action="store_true",
                    help="pretune from an empty database rather than from the shipped one")
    ap.add_argument("--bert-layers", type=int, default=12, help="encoder layers (fewer for a quicker run)")
    ap.add_argument("--smoke", action="store_true", help="tiny models through Triton's CPU interpreter")
    args = ap.parse_args(argv)
    if args.smoke:
        args.tokens, args.strategy = "16,40", "model"
    return args


def pretune_db(args):
    """Where pretune reads and writes: OUT/db, over the shipped database unless ``--fresh-db``."""
    if args.fresh_db or args.smoke:
        return args.out / "db"
    from stuning.db.paths import shipped_dir
    from stuning.tuning.session import open_db

    return open_db(search_path=[args.out / "db", shipped_dir()], write_dir=args.out / "db")


def build(name: str, args, dtype, device):
    from stuning.nn import examples

    if name == "bert":
        sizes = SMOKE_SIZES["bert"] if args.smoke else {"layers": args.bert_layers}
        return examples.bert_encoder(**sizes, dtype=dtype, device=device)
    if name == "llama-mlp":
        return examples.llama_mlp(**(SMOKE_SIZES["llama-mlp"] if args.smoke else {}), dtype=dtype, device=device)
    raise SystemExit(f"unknown model {name!r}; use bert or llama-mlp")


def model_input(model, tokens: int, dtype, device, gen):
    import torch

    seq = SEQUENCE if tokens % SEQUENCE == 0 else tokens
    batch = tokens // seq
    return torch.randn(batch, seq, model.hidden, generator=gen, device=device, dtype=torch.float32).to(dtype)


def semi_structured(dense_model, names: list[str]):
    """The model with each named Linear's weight converted by torch.sparse.to_sparse_semi_structured."""
    import torch
    from torch.sparse import to_sparse_semi_structured

    model = copy.deepcopy(dense_model)
    for name in names:
        layer = model.get_submodule(name)
        layer.weight = torch.nn.Parameter(to_sparse_semi_structured(layer.weight.detach()), requires_grad=False)
    return model


def variants(base, pattern: str, args):
    """{impl: model or None}, notes, and the sparsify report, for one pruning pattern."""
    import torch

    import stuning
    from stuning.bench import error_text

    pattern_name = "2:4" if pattern == "2:4" else "unstructured"
    sparsity = 0.5 if pattern == "2:4" else float(pattern)
    sparse = copy.deepcopy(base)
    report = stuning.sparsify(sparse, sparsity=sparsity, pattern=pattern_name, min_size=0)
    dense = copy.deepcopy(base)  # the same zeros, stored dense
    names = [r.name for r in report.layers]
    with torch.no_grad():
        for name in names:
            dense.get_submodule(name).weight.copy_(sparse.get_submodule(name).dense_weight())
    on_torch = copy.deepcopy(dense)
    stuning.sparsify(on_torch, min_size=0, backend="torch")  # the zeros kept: same CSR weights
    models, notes = {"dense": dense, "stuning": sparse, "cusparse": on_torch, "cslt": None}, {}
    if pattern == "2:4":
        try:
            models["cslt"] = semi_structured(dense, names)
        except Exception as e:
            notes["cslt"] = error_text(e)
    else:
        notes["cslt"] = "2:4 only"
    return models, notes, report


def rel_err(out, ref) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30))


def run_pattern(name: str, base, pattern: str, args, timer, env: dict) -> list[dict]:
    import torch

    import stuning
    from stuning.bench import error_text
    from stuning.bench.timer import time_row
    from stuning.tuning.search import Budget

    models, notes, report = variants(base, pattern, args)
    tokens = [int(t) for t in args.tokens.split(",")]
    t0 = time.perf_counter()
    tuned = stuning.pretune(models["stuning"], tokens=tokens, db=pretune_db(args), strategy=args.strategy,
                            budget=Budget(max_trials=args.trials, max_seconds=args.seconds), check=True)
    pretune_s = time.perf_counter() - t0
    models["fallback"] = copy.deepcopy(models["stuning"])  # dense where pretune timed the dense product faster
    stuning.nn.set_dense_fallback(models["fallback"])
    db_bytes = Path(tuned.database).stat().st_size if Path(tuned.database).is_file() else 0
    reference_model = copy.deepcopy(models["dense"]).float()
    gen = torch.Generator(device=env["torch_device"]).manual_seed(0)
    rows = []
    for t in tokens:
        x = model_input(base, t, base_dtype(base), env["torch_device"], gen)
        with torch.no_grad():
            ref = reference_model(x.float())
            errors, impls = {}, {}
            for impl, model in models.items():
                if model is None:
                    continue
                try:
                    errors[impl] = rel_err(model(x), ref)
                    impls[impl] = lambda m=model, x=x: m(x)
                except Exception as e:
                    notes[impl] = error_text(e)
            timing = time_row(timer, impls)
        row = {"model": name, "pattern": pattern, "sparsity": round(1 - _density(report), 4),
               "tokens": t, **{f"{k}_us": timing.times_us.get(k) for k in IMPLS},
               **{f"{k}_err": errors.get(k) for k in IMPLS}}
        for k in ("dense", "cusparse", "cslt"):
            s, o = row["stuning_us"], row[f"{k}_us"]
            row[f"speedup_vs_{k}"] = o / s if s and o else None
        f, d = row["fallback_us"], row["dense_us"]
        row["fallback_vs_dense"] = d / f if f and d else None
        row["ok"] = max(errors.get(k, float("inf")) for k in ("stuning", "fallback")) <= MODEL_TOLERANCE[args.dtype]
        row.update({"timing": timing.method, "note": "; ".join(filter(None, [timing.note, *notes.values()])),
                    "pretune_s": round(pretune_s, 2), "pretune_tuned": tuned.tuned, "pretune_skipped": tuned.skipped,
                    "pretune_failed": tuned.failed,
                    "db_bytes": db_bytes, "dense_weight_bytes": report.dense_bytes,
                    "sparse_weight_bytes": report.sparse_bytes})
        rows.append(row)
        print(f"  {name} {pattern} tokens={t}: " + ", ".join(f"{k} {v:.1f} us" for k, v in timing.times_us.items()
                                                           if v is not None), flush=True)
    return rows


def base_dtype(model):
    return next(model.parameters()).dtype


def _density(report) -> float:
    """Nonzero fraction over every sparsified weight (weighted by size)."""
    total = sum(r.shape[0] * r.shape[1] for r in report.layers)
    return sum((1 - r.sparsity) * r.shape[0] * r.shape[1] for r in report.layers) / max(1, total)


def results_frame(rows: list[dict], env: dict):
    import pandas as pd

    df = pd.DataFrame(rows)
    for key in ("device", "torch", "triton", "cuda", "cusparselt"):
        df[key] = env[key]
    return df


def write_outputs(rows: list[dict], args, env: dict, elapsed: float) -> None:
    from stuning.bench.report import markdown_table, plot_model_speedups, pretune_text

    out = args.out
    df = results_frame(rows, env)
    df.to_csv(out / "results.csv", index=False)
    short = df[["model", "pattern", "tokens", "dense_us", "stuning_us", "fallback_us", "cusparse_us", "cslt_us",
                "speedup_vs_dense", "fallback_vs_dense", "speedup_vs_cusparse", "speedup_vs_cslt", "stuning_err", "ok"]]
    pretune = df.groupby(["model", "pattern"], sort=False)[["pretune_s", "pretune_tuned", "pretune_skipped",
                                                           "pretune_failed", "db_bytes", "dense_weight_bytes",
                                                           "sparse_weight_bytes"]].first().reset_index()
    lines = [
        "# End-to-end models: stuning SparseLinear vs dense, torch.sparse CSR and cuSPARSELt", "",
        f"Command: `python3 {' '.join(sys.argv)}`", "",
        f"Device: {env['device']}; torch {env['torch']}, triton {env['triton']}, CUDA {env['cuda'] or '-'}, "
        f"cuSPARSELt {env['cusparselt'] or '-'}; dtype {args.dtype}; pretune "
        f"{pretune_text(args.strategy, args.trials, args.seconds)}; {elapsed:.0f} s in all.", "",
        "Forward latency (us, median; `timing` in results.csv says do_bench or CUDA graph) and speedups of "
        "stuning (>1: stuning faster). `stuning_err`: relative error against the fp32 dense model with the "
        f"same zeros (tolerance {MODEL_TOLERANCE[args.dtype]:g}).", "",
        "`fallback`: the same pretuned model with `dense_fallback` on (layers run a dense copy of their "
        "weight where pretune timed the dense product faster); `fallback_vs_dense` is its speedup.", "",
        markdown_table(short, {**{c: ".1f" for c in short if c.endswith("_us")},
                               **{c: ".2f" for c in short if c.startswith("speedup") or c == "fallback_vs_dense"},
                               "stuning_err": ".1e"}), "",
        "Pretune: wall time, problems tuned and already in the database, the database's size after it, and the "
        "sparsified weights' size.", "",
        markdown_table(pretune), "",
    ]
    if env["torch_device"] == "cpu":
        lines.append("No GPU: times are the wall clock of Triton's CPU interpreter and say nothing about GPU speed.")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    plot_model_speedups(df, out / "speedup.png", x="tokens", y="speedup_vs_dense", label="{pattern} vs dense",
                        ylabel="speedup of stuning (>1 faster)")
    print(markdown_table(short[["model", "pattern", "tokens", "speedup_vs_dense", "fallback_vs_dense",
                                "speedup_vs_cusparse", "speedup_vs_cslt", "ok"]],
                         {c: ".2f" for c in short if c.startswith("speedup") or c == "fallback_vs_dense"}))
    print(f"pretune total {pretune['pretune_s'].sum():.1f} s, {int(pretune['pretune_failed'].sum())} problems "
          f"failed; database {int(pretune['db_bytes'].max())} bytes; wrote results.csv, summary.md, speedup.png "
          f"in {out}")



def main(argv=None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    # Forwards look configs up where pretune writes them: set before stuning opens a database.
    os.environ["STUNING_DB_DIR"] = str((args.out / "db").resolve())
    import torch

    from stuning.bench.runner import environment
    from stuning.bench.timer import RowTimer, TimerSettings
    from stuning.tuning.driver import can_measure

    on_gpu = can_measure()
    if not on_gpu and not args.smoke:
        raise SystemExit("no CUDA GPU: run with --smoke (tiny models through Triton's interpreter)")
    torch.backends.cuda.matmul.allow_tf32 = False
    env = {**environment(on_gpu), "torch_device": "cuda" if on_gpu else "cpu"}
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    timer = RowTimer(TimerSettings(), on_gpu)
    start, rows = time.perf_counter(), []
    for name in args.models.split(","):
        base = build(name.strip(), args, dtype, env["torch_device"])
        for pattern in args.sparsities.split(","):
            print(f"{name} {pattern}: sparsify, pretune ({args.strategy}), time", flush=True)
            rows += run_pattern(name.strip(), base, pattern.strip(), args, timer, env)
            results_frame(rows, env).to_csv(args.out / "results.csv", index=False)  # kept if a later step dies
        del base
    write_outputs(rows, args, env, time.perf_counter() - start)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
