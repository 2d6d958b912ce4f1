source scripts/gpu_env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -c 'import torch; print("gpus", torch.cuda.device_count())'
for w in 1 2; do
  t0=$(date +%s.%N)
  python3 -m stuning pretune --model stuning.nn.examples:bert_encoder --sparsity 0.9 --tokens 16,128 --dtype fp16 --seconds 15 --refresh --db /tmp/db$w --workers $w --storage /tmp/tune$w.journal > $OUT/pretune-w$w.log 2>&1
  rc=$?; t1=$(date +%s.%N)
  echo "workers=$w rc=$rc wall_s=$(python3 -c "print(round($t1-$t0,1))")" | tee -a $OUT/walltimes.txt
  tail -2 $OUT/pretune-w$w.log
  cp /tmp/db$w/*.json $OUT/db-w$w.json 2>/dev/null
done
