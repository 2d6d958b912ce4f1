source scripts/gpu_env.sh
NCU=/usr/local/cuda/bin/ncu
PROFILE_CASES=k128,L1024 timeout 200 $NCU --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section SourceCounters --section ComputeWorkloadAnalysis -o $OUT/k128 python3 scripts/profile_kernels.py 2>&1 | tail -1
$NCU --import $OUT/k128.ncu-rep --page details > $OUT/details.txt
$NCU --import $OUT/k128.ncu-rep --page source --print-source sass --csv -k regex:tiled --launch-count 1 > $OUT/source.csv 2>&1
grep -E "^  [a-z_]|Duration|Throughput  |Achieved Occ|Theoretical Occ|Registers Per|Dynamic Shared|Grid Size|Block Size|Waves|Warp Cycles Per Issued" $OUT/details.txt | cut -c1-130
