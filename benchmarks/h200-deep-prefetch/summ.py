"""One line per probe row: its problem, cuBLAS, the pick and every config's time (us)."""
import json
import sys

for path in sys.argv[1:]:
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.startswith("{")]
    for r in rows:
        cells = " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}=ERR" for k, v in r["scatter"].items())
        print(f"{path.split('/')[-1]:<34} n={r['n']} s={r['sparsity']} cublas={r['cublas_us']:.2f} "
              f"pick={r['pick_us']:.2f} | {cells}")
