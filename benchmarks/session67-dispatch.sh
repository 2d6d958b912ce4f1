# Session 67's one device call, on whichever GPU came: an H100 runs the sibling bench's run A
# (benchmarks/h100-sibling-lookup/call1.sh), an H200 the fp32 SDDMM re-tune
# (benchmarks/h100-sddmm-fp32-parts/call2.sh, its H200 branch); each cut to about 360 s, as the
# session's device time went on failed starts.
dev=$(python3 -c "import torch; print(torch.cuda.get_device_name())")
echo "device: $dev"
case "$dev" in
  *H100*) BENCH_SECONDS=50 bash benchmarks/h100-sibling-lookup/call1.sh A; tail -5 $OUT/bench.log ;;
  *) TUNE_SECONDS=180 BENCH_SECONDS=100 bash benchmarks/h100-sddmm-fp32-parts/call2.sh ;;
esac
