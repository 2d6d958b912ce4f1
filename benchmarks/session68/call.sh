# Session 68's device calls, on whichever GPU comes; `bash benchmarks/session68/call.sh PHASE`.
# The scratch database in /tmp/sdb is kept between calls on a warm machine (a fresh one starts from
# the shipped files), and every call returns it, so a cut-off session loses at most one call.
#   H200 0: before any re-tune, the fp32 SpMM first table benched twice: with the shipped files (A),
#           where 28 of its stale entries give way to the H100's scatter ones (siblings.searched_further),
#           and with nvidia-h100-80gb-hbm3.json moved away (B), as the H200's own entries answer.
#   H200 1: the SpMM entries `stuning db untried` lists (100 fp32 ones tuned before the scatter
#           kernel took fp32, BENCHMARKS 9m/9r) re-tuned with it.
#   H200 2: what phase 1 left, then the untried SDDMM entries, then the first table's fp32 70% SpMM rows.
#   H200 3: the fp32 first tables (SpMM, SDDMM) benched on the re-tuned entries.
#   H100 2: what call 1 and session 68's fp32 tunes left (BENCHMARKS 9s): four fp16 problems, the fp32
#           98% rows of 4096 x 11008 (and 11008 x 4096 at N = 2048) and the fp32 70% rows but BERT's
#           at N = 128 / 2048, then the fp32 SpMM first table benched.
#   H100 1: the seven fp16 SpMM first-table problems without an H100 entry (call6.sh's rest), then
#           the fp16 and fp32 SpMM first tables benched.
# Merge a returned database by hand: python3 -m stuning db merge --device "<name>" --out
# tuning_db/<file> tuning_db/<file> <files_at>/<file>; then `stuning db refit`.
source scripts/gpu_env.sh >/dev/null || exit 1
[ -d /tmp/sdb ] || { mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/; }
dev=$(python3 -c "import torch; print(torch.cuda.get_device_name())")
echo "device: $dev; phase ${1:-1}"
bench() {  # $1: name, $2: seconds; the rest: filters
  local name=$1 secs=$2; shift 2
  timeout -s KILL $((secs + 40)) stuning bench --suite first-table --configs auto --max-seconds $secs "$@" \
    --out /tmp/bench-$name > $OUT/bench-$name.log 2>&1
  echo "bench $name rc=$?"
  cp /tmp/bench-$name/results.csv $OUT/$name.csv 2>/dev/null
  tail -4 $OUT/bench-$name.log
}
untried() {  # $1: op, $2: seconds
  timeout -s KILL $(($2 + 60)) stuning tune --untried --op $1 --seconds 4 --max-seconds $2 --json \
    > $OUT/tune-untried-$1.json 2> $OUT/tune-untried-$1.log
  echo "untried $1 rc=$?"
  stuning db untried --device "$dev" --op $1 --json 2>/dev/null |
    python3 -c "import json,sys; print(len(json.load(sys.stdin)['entries']), '$1 entries still untried')"
}
case "$dev:${1:-1}" in
  *H200*:0) bench spmm-fp32-A 100 --ops spmm --dtypes fp32
    mv tuning_db/nvidia-h100-80gb-hbm3.json /tmp/ && rm -f /tmp/sdb/nvidia-h100-80gb-hbm3.json
    bench spmm-fp32-B 100 --ops spmm --dtypes fp32
    mv /tmp/nvidia-h100-80gb-hbm3.json tuning_db/ && cp tuning_db/nvidia-h100-80gb-hbm3.json /tmp/sdb/ ;;
  *H200*:1) untried spmm 450 ;;
  *H200*:2) untried spmm 180; untried sddmm 180
    timeout -s KILL 100 stuning tune --suite first-table --op spmm --dtype fp32 --sparsity 0.7 --n 128 --seconds 4 \
      --max-seconds 60 > $OUT/tune-spmm-70.log 2>&1; echo "spmm70 rc=$?" ;;
  *H200*:3) bench spmm-fp32 200 --ops spmm --dtypes fp32; bench sddmm-fp32 200 --ops sddmm --dtypes fp32 ;;
  *H100*:1) tune="stuning tune --suite first-table --op spmm --dtype fp16 --seconds 5"
    { timeout -s KILL 40 $tune --shape 4096x11008 --n 2048 --sparsity 0.7 --skew 0.4 --max-seconds 5
      timeout -s KILL 40 $tune --shape 3072x768 --n 2048 --sparsity 0.95,0.98 --max-seconds 30
      timeout -s KILL 20 $tune --shape 3072x768 --n 2048 --sparsity 0.9 --skew 0.4 --max-seconds 5
      timeout -s KILL 20 $tune --shape 4096x11008 --n 128 --sparsity 0.98 --skew 0.4 --max-seconds 5
    } > $OUT/tune-fp16.log 2>&1; echo "tune fp16 done"
    bench spmm-fp16 100 --ops spmm --dtypes fp16; bench spmm-fp32 150 --ops spmm --dtypes fp32 ;;
  *H100*:2) f16="stuning tune --suite first-table --op spmm --dtype fp16 --seconds 5"
    f32="stuning tune --suite first-table --op spmm --dtype fp32 --seconds 4"
    { timeout -s KILL 45 $f16 --shape 3072x768 --n 2048 --sparsity 0.98 --max-seconds 25
      timeout -s KILL 40 $f16 --shape 3072x768 --n 2048 --sparsity 0.9 --skew 0.4 --max-seconds 5
      timeout -s KILL 40 $f16 --shape 4096x11008 --n 128 --sparsity 0.98 --skew 0.4 --max-seconds 5
      timeout -s KILL 100 $f32 --shape 4096x11008 --sparsity 0.98 --max-seconds 70
      timeout -s KILL 50 $f32 --shape 11008x4096 --n 2048 --sparsity 0.98 --max-seconds 20
      timeout -s KILL 90 $f32 --shape 4096x4096,4096x11008,11008x4096 --n 128,2048 --sparsity 0.7 --max-seconds 70
      timeout -s KILL 70 $f32 --n 16 --sparsity 0.7 --max-seconds 45
    } > $OUT/tune.log 2>&1; echo "tunes done"
    bench spmm-fp32 80 --ops spmm --dtypes fp32 ;;
  *) echo "no work for $dev phase ${1:-1}" ;;
esac
cp /tmp/sdb/nvidia-h*.json $OUT/ 2>/dev/null; ls $OUT
