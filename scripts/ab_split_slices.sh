#!/usr/bin/env bash
# One device call: the scatter kernel's split-K epilogue, slices (store_split) against atomics
# (add_split), timed by probe_spmm_smem_scatter.py on decode shapes. Needs scripts/gpu_env.sh first.
set -u
export PYTHONPATH=$PWD/scripts:${PYTHONPATH:-} PROBE_NS=128
run() {  # $1: label, $2: SLICES_MAX_BYTES
  python3 -c "import runpy, stuning.kernels.spmm_scatter as s; s.SLICES_MAX_BYTES = $2; \
runpy.run_path('scripts/probe_spmm_smem_scatter.py', run_name='__main__')" > "$OUT/$1.log" 2>&1
  cp "$OUT/spmm_smem_scatter_probe.json" "$OUT/$1.json"
  echo "== $1"; tail -3 "$OUT/$1.log"
}
for shape in ${AB_SHAPES:-4096x1024 4096x4096 4096x8192}; do
  export PROBE_SHAPE=$shape PROBE_SPARSITIES=${AB_SPARSITIES:-0.9}
  export PROBE_CONFIGS=${AB_CONFIGS:-64x128x128:2:3,64x128x128:4:2,64x64x128:4:3}
  run "$shape-atomics" 0
  run "$shape-slices" "64 << 20"
done
