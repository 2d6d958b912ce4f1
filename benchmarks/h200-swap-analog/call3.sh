source scripts/gpu_env.sh
cd scripts
PROBE_SHAPES=4096x4096,11008x4096 PROBE_SPLITS=2 PROBE_KINDS=ax:4,xta:4,xta:8 PROBE_STAGES=2,3,4 timeout 200 python3 probe_swap_analog.py 2>&1 | grep -v Warn | tail -22
PROBE_SHAPES=4096x4096 PROBE_SPLITS=1,4 PROBE_KINDS=ax:4,xta:8 PROBE_STAGES=3 timeout 120 python3 probe_swap_analog.py 2>&1 | grep -v Warn | tail -6
