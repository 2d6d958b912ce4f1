# Call 2 (after call 1, with the patch applied): the SDDMM entries `stuning db untried` lists on the GPU's
# Triton re-tuned (fp32 on the new tiles; fp16 / fp32 ones that never tried the dense kernel), then
# merged by hand into tuning_db/nvidia-h200.json:
#   python3 -m stuning db merge --device "NVIDIA H200" --out tuning_db/nvidia-h200.json \
#     tuning_db/nvidia-h200.json <files_at>/db-after.json
source scripts/gpu_env.sh >/dev/null
mkdir -p /tmp/sdb && cp tuning_db/*.json /tmp/sdb/
stuning db untried --device "NVIDIA H200" --json > $OUT/untried-before.json
timeout -s KILL 420 stuning tune --untried --op sddmm --seconds 6 --json > $OUT/tune-sddmm.json 2> $OUT/tune-sddmm.log
echo sddmm_rc=$?
cp /tmp/sdb/nvidia-h200.json $OUT/db-after.json
stuning db untried --device "NVIDIA H200" --json > $OUT/untried-after.json
python3 -c "import json; print(len(json.load(open('$OUT/untried-after.json'))['entries']), 'entries still untried')"
