#!/usr/bin/env bash
# Session 59, device call 5 (run from a copy of 2b22465 at ab_old/: git archive, trimmed to the package):
# the old (row-major store) and new (column store) epilogue at decode sizes, same configs.
set -u
source scripts/gpu_env.sh || exit 1
export PROBE_SHAPES=11008x4096,4096x11008,3072x768 PROBE_NS=16,128
for tree in ab_old .; do
  python3 -m pip install -q --no-deps --no-build-isolation -e $tree >/dev/null 2>&1 || { echo "install $tree failed"; exit 1; }
  echo "== tree $tree"; (cd $tree && OUT=$OUT/$tree python3 scripts/probe_semi24_layouts.py 2>&1 | tail -13)
done
