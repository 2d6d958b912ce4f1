#!/usr/bin/env bash
# Device call 8 (session 48): after the review's mend (the gather and sampling kernels' shared
# nonzero block and store), the SDDMM tests on the GPU and the two fp16 SDDMM tables again.
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/nvidia-h200.json /tmp/sdb/
python3 -m pytest -q -p no:cacheprovider tests/test_sddmm_dense.py tests/test_sddmm.py tests/test_sddmm_tiled.py --tb=short 2>&1 | tee $OUT/pytest-sddmm.txt | tail -2
python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py -k sddmm --tb=short 2>&1 | tee $OUT/pytest-gpu-sddmm.txt | tail -2
for s in attention:full first:first-table; do name=${s%%:*}; suite=${s#*:}
  shapes=$([ $name = attention ] && echo "--shapes attention")
  timeout 150 stuning bench --suite $suite --ops sddmm $shapes --dtypes fp16 --configs auto --out /tmp/b$name > /tmp/b$name.log 2>&1
  echo "$name rc $?"; mkdir -p $OUT/$name; cp /tmp/b$name/results.csv /tmp/b$name/summary.md $OUT/$name/ 2>/dev/null
  grep -E "^\| sddmm \| fp16 \|" /tmp/b$name/summary.md
done
