source scripts/gpu_env.sh
cd scripts
PROBE_SHAPES=4096x4096,11008x4096,4096x11008 PROBE_SPLITS=2 PROBE_KINDS=ax:4,axh:4 PROBE_STAGES=4 timeout 150 python3 probe_swap_analog.py 2>&1 | grep -v Warn | tail -8
PROBE_N=16 PROBE_SHAPES=4096x4096,11008x4096 PROBE_SPLITS=2 PROBE_KINDS=ax:4,axh:4 PROBE_STAGES=4 timeout 100 python3 probe_swap_analog.py 2>&1 | grep -v Warn | tail -6
