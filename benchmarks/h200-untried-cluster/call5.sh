#!/usr/bin/env bash
# Device call 5 (session 45): clusters of four only on N tiles >= 64. GPU tests of the scatter
# kernel; the fp16 decode problems at N = 128 re-tuned (6 s each) on a copy of the shipped database;
# then the decode rows (fp16, bf16) on the result.
source scripts/gpu_env.sh
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_spmm_scatter.py --tb=short 2>&1 | tee $OUT/pytest.txt | tail -3
timeout 240 stuning tune --op spmm --shape 768x3072,3072x768,11008x4096,4096x4096,4096x11008 --n 128 \
  --sparsity 0.9,0.95 --skew 0,0.4 --dtype fp16 --seconds 6 --json > $OUT/tune-n128.json 2> $OUT/tune-n128.log
echo "tune rc $?"
cp /tmp/sdb/nvidia-h200.json $OUT/db-after-tune.json
for dt in fp16 bf16; do
  stuning bench --suite first-table --ops spmm --dtypes $dt --ns 16,128 --sparsities 90,95 --skews 0,0.4 \
    --configs auto --out /tmp/b-$dt > /tmp/b-$dt.log 2>&1
  cp /tmp/b-$dt/results.csv $OUT/decode-$dt.csv; cp /tmp/b-$dt/summary.md $OUT/decode-$dt.md
  grep "| spmm | $dt |" /tmp/b-$dt/summary.md | head -4
done
