"""``stuning pretune``: sparsify a model's weights and tune their sparse products ahead of serving."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from stuning.cli.errors import EXIT_FAILED, EXIT_NO_GPU, EXIT_OK, CLIError
from stuning.cli.output import console, fmt_config, fmt_ratio, fmt_us, print_json, table
from stuning.cli.problems import add_search_args, parse_fraction, split_list

DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def register(sub) -> None:
    p = sub.add_parser(
        "pretune", help="sparsify a model's weights and tune every distinct sparse product into the database",
        description="Build a model (--model) or read its weights (--weights), sparsify its linear and convolution "
        "layers as stuning.sparsify does, and tune each distinct (op, shape, sparsity, dtype, tokens) problem once. "
        "Problems already in the database are skipped, so an interrupted run resumes; those tuned before a "
        "kernel of their space existed are tuned again (`stuning db untried` lists them).",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", metavar="MODULE:FUNCTION",
                        help="a callable building the nn.Module, e.g. stuning.nn.examples:bert_encoder")
    source.add_argument("--weights", metavar="FILE", type=Path,
                        help="a safetensors or torch state-dict file; its 2-D *.weight tensors are the layers")
    p.add_argument("--sparsity", default=None,
                   help="magnitude-prune each weight to this fraction of zeros (2:4 takes 0.5); "
                   "default: keep the zeros the weights have")
    p.add_argument("--pattern", default="unstructured", choices=["unstructured", "2:4"])
    p.add_argument("--tokens", default=None,
                   help="token counts (columns of X) to tune every layer for (default: 16,128,512,2048)")
    p.add_argument("--input-shapes", default=None, metavar="BxCxHxW,...",
                   help="instead of --tokens: the model's input shapes, e.g. 1x3x224x224,8x3x224x224; each layer "
                   "is tuned at the N they give it (a convolution's N is batch x H_out x W_out)")
    p.add_argument("--dtype", default=None, choices=sorted(DTYPES), help="serve in this dtype (default: the weights')")
    p.add_argument("--min-size", type=int, default=None, help="leave weights with fewer entries dense")
    p.add_argument("--skip", default="*embed*", help="comma-separated layer-name globs to leave dense")
    add_search_args(p)
    p.add_argument("--db", default=None, metavar="DIR",
                   help="database directory to read and write (default: the device's; serve with STUNING_DB_DIR=DIR)")
    p.add_argument("--refresh", action="store_true",
                   help="search again the problems the database already answers (after an upgrade), "
                        "the stored configs first")
    p.add_argument("--no-check", action="store_true",
                   help="do not run each chosen config against a reference (slow in the CPU interpreter)")
    p.add_argument("--workers", default=None, metavar="N|auto",
                   help="tune in N processes, worker i on GPU i of CUDA_VISIBLE_DEVICES (without a GPU: N CPU "
                   "processes); auto: one per visible GPU")
    p.add_argument("--storage", default=None, metavar="URL",
                   help="Optuna storage holding the work list and every search: a journal file for one machine, "
                   "an RDB URL (postgresql://...) for several; the same command elsewhere joins, a rerun resumes")
    p.add_argument("--max-seconds", type=float, default=None, metavar="S",
                   help="start no problem after this long (a worker's first always starts); those left are "
                        "reported 'not started', and a rerun tunes them")
    p.add_argument("--json", action="store_true", help="print the reports as JSON")
    p.set_defaults(func=run)


def build_model(spec: str):
    """The nn.Module that ``module:function`` builds."""
    from torch import nn

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CLIError(f"--model {spec!r}: write it as module:function, e.g. stuning.nn.examples:bert_encoder")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # a model file beside the user, as `python -m` would find it
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise CLIError(f"--model: cannot import module {module_name!r} ({e})") from None
    builder = getattr(module, attr, None)
    if not callable(builder):
        raise CLIError(f"--model: module {module_name!r} has no callable {attr!r}")
    model = builder()
    if not isinstance(model, nn.Module):
        raise CLIError(f"--model: {spec} returned a {type(model).__name__}, not an nn.Module")
    return model


def _load_model(args):
    if args.model:
        return build_model(args.model)
    from stuning.nn.checkpoint import linears_from_weights, load_weights

    if not args.weights.is_file():
        raise CLIError(f"no such weights file: {args.weights}")
    return linears_from_weights(load_weights(args.weights))


def run(args) -> int:
    import torch

    from stuning.nn import pretune, sparsify
    from stuning.nn.sparsify import DEFAULT_MIN_SIZE
    from stuning.tuning.driver import require_measuring
    from stuning.tuning.search import Budget

    if args.tokens is not None and args.input_shapes is not None:
        raise CLIError("give --tokens (the N of every layer) or --input-shapes, not both")
    tokens = None if args.tokens is None else split_list(args.tokens, "tokens", int)
    if tokens is not None and any(t <= 0 for t in tokens):
        raise CLIError(f"--tokens values must be positive, got {args.tokens!r}")
    input_shapes = None
    if args.input_shapes is not None:
        input_shapes = split_list(
            args.input_shapes, "input-shapes", lambda t: tuple(int(d) for d in t.lower().split("x"))
        )
    sparsity = None if args.sparsity is None else parse_fraction(args.sparsity)
    if args.trials is not None and args.trials < 1:
        raise CLIError("--trials must be at least 1")
    if args.max_seconds is not None and not args.max_seconds > 0:
        raise CLIError(f"--max-seconds must be positive, got {args.max_seconds}")
    try:
        require_measuring(args.strategy)
    except RuntimeError as e:
        raise CLIError(str(e), EXIT_NO_GPU) from None
    if args.db is not None and Path(args.db).exists() and not Path(args.db).is_dir():
        raise CLIError(f"--db must be a directory, got the file {args.db}")
    # Seeded, so that a --model with random weights builds the same ones on every machine joining a
    # --storage run (their problems, keyed by sparsity statistics, must be the same problems).
    torch.manual_seed(0)
    model = _load_model(args)
    if args.dtype:
        model = model.to(getattr(torch, DTYPES[args.dtype]))
    skip = [g.strip() for g in args.skip.split(",") if g.strip()]
    min_size = DEFAULT_MIN_SIZE if args.min_size is None else args.min_size
    sparse = sparsify(model, sparsity=sparsity, pattern=args.pattern, min_size=min_size, skip=skip)
    if not sparse.layers:
        raise CLIError(f"no layer to sparsify: all {len(sparse.skipped)} were skipped (see --min-size, --skip)")
    budget = None
    if args.trials is not None or args.seconds is not None:
        budget = Budget(max_trials=args.trials, max_seconds=args.seconds)
    tuned = pretune(model, tokens=tokens, input_shapes=input_shapes, db=args.db, budget=budget,
                    strategy=args.strategy, device=args.device,
                    check=not args.no_check, progress=not args.json, workers=args.workers, storage=args.storage,
                    refresh=args.refresh, max_seconds=args.max_seconds)
    code = EXIT_FAILED if tuned.failed else EXIT_OK
    if args.json:
        print_json({"sparsify": sparse.to_dict(), "pretune": tuned.to_dict()})
        return code
    con = console()
    con.print(sparse.table())
    rows = [[p.layers[0] + (f" (+{len(p.layers) - 1})" if len(p.layers) > 1 else ""), p.op,
             "x".join(map(str, p.shape)), p.tokens, p.dtype, p.status, fmt_config(p.config or {}) or p.note,
             fmt_us(p.time_us), fmt_us(p.predicted_us), fmt_us(p.dense_us),
             fmt_ratio(p.speedup_vs_dense)] for p in tuned.problems]
    con.print(table(f"pretune for {tuned.device} ({tuned.strategy})",
                    ["layer", "op", "shape", "tokens", "dtype", "status", "config", "measured us", "predicted us",
                     "dense us", "vs dense"], rows))
    left = f", {tuned.not_started} not started (--max-seconds; a rerun tunes them)" if tuned.not_started else ""
    con.print(f"{tuned.tuned} tuned, {tuned.skipped} already in the database, {tuned.unsupported} unsupported, "
              f"{tuned.failed} failed{left}, in {tuned.seconds:.1f} s; database: {tuned.database}")
    compared = [p for p in tuned.problems if p.speedup_vs_dense is not None]
    if compared:
        slower = [p for p in compared if p.speedup_vs_dense < 1]
        con.print(f"{len(compared) - len(slower)} of {len(compared)} timed problems run faster than their dense layer"
                  + (f"; {len(slower)} slower (down to {min(p.speedup_vs_dense for p in slower):.2f}x): "
                     "a higher sparsity or fewer tokens per call is where these kernels pay" if slower else ""))
    for w in getattr(tuned, "workers", []):
        if w["exit_code"] != 0:
            con.print(f"worker {w['index']} (pid {w['pid']}, GPU {w['gpu']}) exited with code {w['exit_code']}")
    for lost in getattr(tuned, "lost", []):
        then = "retried" if lost["retried"] else "not retried"
        con.print(f"lost: attempt {lost['attempt']} at {lost['key']} ({lost['worker']} died); {then}")
    return code
