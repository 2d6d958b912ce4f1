import json, sys
for path in sys.argv[1:]:
    for line in open(path):
        if line.startswith("{"):
            r = json.loads(line)
            cells = " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}=ERR" for k, v in r["scatter"].items())
            print(f"{path.split('/')[-1]:<34} n={r['n']} s={r['sparsity']} cublas={r['cublas_us']:.2f} pick={r['pick_us']:.2f} | {cells}")
