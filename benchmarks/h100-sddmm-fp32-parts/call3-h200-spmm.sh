# Not yet run (needs an H200): the 100 fp32 SpMM entries tuned before the scatter kernel took fp32
# (BENCHMARKS.md 9m) re-tuned with it, then the first table's fp32 70% rows, which have no entries of
# their own (their nearest, 80% ones, ran six N = 128 rows at 0.77-0.90x SGEMM); merge db-after.json
# as in call2.sh.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/
timeout -s KILL 460 stuning tune --untried --op spmm --seconds 4 --json > $OUT/tune-spmm.json 2> $OUT/tune-spmm.log
echo spmm_rc=$?
timeout -s KILL 110 stuning tune --suite first-table --op spmm --dtype fp32 --sparsity 0.7 --n 128 --seconds 4 \
  --json > $OUT/tune-spmm-70.json 2> $OUT/tune-spmm-70.log
echo spmm70_rc=$?
cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
stuning db untried --device "NVIDIA H200" --op spmm --json > $OUT/untried-after.json
python3 -c "import json; print(len(json.load(open('$OUT/untried-after.json'))['entries']), 'SpMM entries still untried')"
