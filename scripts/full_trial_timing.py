"""Run a script or module with every tuning trial timed as before BENCHMARKS.md 8d: ``bench_us``'s
full settings (do_bench 25 + 100 ms, 100 ms of graph replays) for each trial and for re-timing, and
three finalists re-timed. For A/B runs of the screening tuner against the old one in one device call.

    python3 scripts/full_trial_timing.py scripts/bench_models.py --fresh-db --out OUT ...
    python3 scripts/full_trial_timing.py -m stuning tune --op spmm ...
"""

import runpy
import sys

from stuning.tuning import timing, tuner

FULL = {"warmup_ms": 25, "rep_ms": 100, "graph_rep_ms": 100}
# The objective reads these dicts at each call, so updating them in place reaches every tune.
timing.SCREEN_TIMING.update(FULL)
timing.RETIME_TIMING.update(FULL)
tuner.RETIME_TOP = 3
if sys.argv[1] == "-m":
    sys.argv = [sys.argv[2], *sys.argv[3:]]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
else:
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
