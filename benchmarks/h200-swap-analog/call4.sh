source scripts/gpu_env.sh
cd scripts
PROBE_SHAPES=4096x4096,11008x4096 PROBE_SPLITS=2 PROBE_KINDS=ax:4,ax-xonce:4,ax-aonce:4 PROBE_STAGES=3,4 timeout 150 python3 probe_swap_analog.py 2>&1 | grep -v Warn | tail -13
PROBE_SHAPES=4096x4096,11008x4096 PROBE_SPLITS=2,4 PROBE_KINDS=ax128:8 PROBE_STAGES=2,3 timeout 150 python3 probe_swap_analog.py 2>&1 | grep -v Warn | tail -9
PROBE_N=16 PROBE_SHAPES=4096x4096 PROBE_SPLITS=4 PROBE_KINDS=ax:4,ax-xonce:4,ax-aonce:4 PROBE_STAGES=4 timeout 100 python3 probe_swap_analog.py 2>&1 | grep -v Warn | tail -4
