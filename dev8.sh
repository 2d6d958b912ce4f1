source scripts/gpu_env.sh
python3 -m pytest -q -p no:cacheprovider -m gpu -k "sddmm or tiled" tests 2>&1 | tail -1
python3 -m stuning bench --suite full --ops sddmm --shapes attention --dtypes fp16 --configs auto --out $OUT/bench > $OUT/bench.log 2>&1
tail -2 $OUT/bench.log
python3 - <<'PY'
import pandas as pd, glob, os, numpy as np
d=pd.read_csv(os.environ["OUT"]+"/bench/results.csv")
print(d[d.sparsity>=0.9][['m','k','sparsity','time_us','dense_us','speedup_vs_dense']].to_string())
print(d.groupby('sparsity').speedup_vs_dense.apply(lambda s: float(np.exp(np.log(s).mean()))))
PY
