#!/usr/bin/env bash
# Device call 4 (session 45): four K splits as a cluster of four CTAs. GPU tests of the scatter
# kernel, then the decode rows on the shipped database with four-split clusters on / off / on.
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_spmm_scatter.py --tb=short 2>&1 | tee $OUT/pytest.txt | tail -15
n=0
for c in 4 2 4; do
  python3 -c "import sys, stuning.kernels.spmm_scatter as s; s.CLUSTER_SPLITS = (2, 4) if $c == 4 else (2,)
from stuning.cli.main import main; sys.exit(main(sys.argv[1:]))" bench --suite first-table --ops spmm \
    --dtypes fp16 --ns 16,128 --sparsities 90,95 --skews 0,0.4 --configs auto --out /tmp/b$c > /tmp/b$c.log 2>&1
  n=$((n+1)); cp /tmp/b$c/results.csv $OUT/decode-$n-upto$c.csv; cp /tmp/b$c/summary.md $OUT/decode-$n-upto$c.md
  echo "== run $n, clusters up to $c"; grep "| spmm | fp16 |" /tmp/b$c/summary.md | head -4
done
