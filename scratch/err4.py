import traceback, torch, stuning
from stuning.formats.csr import CSRMatrix
from stuning.kernels.spmm import SpMMConfig
cfg = SpMMConfig(64, 64, 16, 1, False, 4, 4, "scatter", split_k=4)
g = torch.Generator(device="cuda").manual_seed(0)
d = torch.randn(4096, 4096, device="cuda", dtype=torch.float16) * (torch.rand(4096, 4096, device="cuda") < 0.1)
a = CSRMatrix.from_dense(d, pad_to=4)
b = torch.randn(4096, 16, device="cuda", dtype=torch.float16)
try:
    y = stuning.spmm(a, b, config=cfg)
    print("ok", ((y.double() - d.double() @ b.double()).norm() / (d.double() @ b.double()).norm()).item())
except Exception as e:
    s = traceback.format_exc()
    print(s[-6000:])
