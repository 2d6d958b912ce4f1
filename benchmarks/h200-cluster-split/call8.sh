#!/usr/bin/env bash
# Device call 8 (session 44): the scatter kernel's two splits as a cluster. GPU tests of the scatter
# kernel, then the decode rows on the shipped database, the cluster on / off / on.
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m pytest -q -m gpu tests/test_spmm_scatter.py -x 2>&1 | tail -4 | tee $OUT/pytest.txt
n=0
for c in 1 0 1; do
  python3 -c "import sys, stuning.kernels.spmm_scatter as s; s.CLUSTER_SPLIT = $c == 1
from stuning.cli.main import main; sys.exit(main(sys.argv[1:]))" bench --suite first-table --ops spmm \
    --dtypes fp16 --ns 16,128 --sparsities 90,95 --skews 0,0.4 --configs auto --out /tmp/b$c > /tmp/b$c.log 2>&1
  n=$((n+1)); cp /tmp/b$c/results.csv $OUT/decode-$n-cluster$c.csv; cp /tmp/b$c/summary.md $OUT/decode-$n-cluster$c.md
  echo "== run $n, cluster $c"; grep "| spmm | fp16 |" /tmp/b$c/summary.md | head -4
done
