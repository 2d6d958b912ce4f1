# Call 3 (main, with or without the patch): the 100 fp32 SpMM entries tuned before the scatter kernel took fp32
# (BENCHMARKS.md 9m) re-tuned with it; merge db-after.json as in call 2.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/
timeout -s KILL 520 stuning tune --untried --op spmm --seconds 4 --json > $OUT/tune-spmm.json 2> $OUT/tune-spmm.log
echo spmm_rc=$?
cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
stuning db untried --device "NVIDIA H200" --op spmm --json > $OUT/untried-after.json
python3 -c "import json; print(len(json.load(open('$OUT/untried-after.json'))['entries']), 'SpMM entries still untried')"
