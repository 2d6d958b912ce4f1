#!/usr/bin/env bash
# Set up stuning on a fresh machine: PyTorch first (the CPU build where there is no GPU, so pip
# does not pull gigabytes of CUDA), then the package with its test tools, editable.
# PYTHON picks the interpreter (default python3); STUNING_TORCH overrides the torch requirement.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    torch_req=${STUNING_TORCH:-torch}
  else
    # On these machines this pin resolves to the local CPU-only wheel.
    torch_req=${STUNING_TORCH:-torch==2.13.0}
  fi
  echo "install.sh: installing $torch_req"
  "$PY" -m pip install -q "$torch_req"
fi
# The installed torch satisfies the package's torch requirement, so this adds no CUDA wheels.
"$PY" -m pip install -q -e ".[dev]"
"$PY" - <<'PY'
import numpy, torch, triton
print(f"install.sh: torch {torch.__version__}, triton {triton.__version__}, numpy {numpy.__version__}, "
      f"cuda {'available' if torch.cuda.is_available() else 'not available (kernels run in the interpreter)'}")
PY
