#!/usr/bin/env bash
# Session 58, device call 4: call 3 found the tiled kernel's 128 x 128 runs of four faster at L = 4096,
# K = 128, 98% (15.5 us) than the entry's gather config (16.2), whose 12-s search timed 16 configs, all
# gather. Re-tune the attention entries at 95/98% for L = 2048/4096 with 40 s each, then bench them.
set -u
source scripts/gpu_env.sh || exit 1
mkdir -p $OUT
timeout 400 stuning tune --op sddmm --shape 2048x2048,4096x4096 --n 64,128 --sparsity 0.95,0.98 --dtype fp16 \
  --mask attention --seconds 40 --json > $OUT/tune-sddmm.json 2> $OUT/tune-sddmm.err
echo "tune rc $?"; cp -r $STUNING_DB_DIR $OUT/sdb
timeout 150 stuning bench --suite full --ops sddmm --shapes attention --dtypes fp16 --sparsities 95,98 \
  --configs auto --out $OUT/bench-sddmm > $OUT/bench.txt 2>&1; echo "bench rc $?"
tail -n 25 $OUT/bench.txt
