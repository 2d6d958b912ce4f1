import sys, pandas as pd, numpy as np
d = pd.read_csv(sys.argv[1])
g = lambda s: float(np.exp(np.log(s).mean()))
print("all", round(g(d.speedup_vs_dense),3), round(g(d.speedup_vs_cusparse),2), "rows", len(d), "wrong", (~d.ok).sum())
for n, x in d.groupby("n"): print("N", n, round(g(x.speedup_vs_dense),3))
dec = d[d.n.isin([16,128]) & d.sparsity.isin([0.9,0.95])]
for s, x in dec.groupby("sparsity"): print("decode", s, round(g(x.speedup_vs_dense),3), "N128", round(g(x[x.n==128].speedup_vs_dense),3))
print("decode vs cusparse", round(g(dec.speedup_vs_cusparse),2))
w = d[(d.n>=2048)&(d.m>=4096)&(d.k>=4096)]
for s, x in w.groupby("sparsity"): print("wide", s, round(g(x.speedup_vs_dense),3))
print(d.config_source.str.split(":").str[0].value_counts().to_dict())
print(d.config_source.value_counts().to_dict())
