# Source this first in a device call (the lent GPU has no network, no optuna, no platformdirs and
# no safetensors; `../shared/gpu/fetch-wheels.sh platformdirs safetensors` fetches them all):
#
#   source scripts/gpu_env.sh && OUT=/tmp/gc bash scripts/gpu_check.sh tests
#
# It installs the wheels that ../shared/gpu/fetch-wheels.sh put in .whl/ (carry ".whl") into
# /tmp/site, puts them on PYTHONPATH, installs the project in editable mode, and keeps tuning
# results in a scratch database (STUNING_DB_DIR) rather than the shipped tuning_db/.
if ! ls .whl/*.whl >/dev/null 2>&1; then
  echo "gpu_env.sh: no wheels in .whl/: run ../shared/gpu/fetch-wheels.sh here and carry .whl" >&2
  return 1 2>/dev/null || exit 1
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl ||
  { echo "gpu_env.sh: installing .whl/ failed" >&2; return 1 2>/dev/null || exit 1; }
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 ||
  { echo "gpu_env.sh: pip install -e . failed" >&2; return 1 2>/dev/null || exit 1; }
export PYTHONUNBUFFERED=1 STUNING_DB_DIR=${STUNING_DB_DIR:-/tmp/sdb}
python3 -c "import optuna, stuning, torch; print(f'gpu_env.sh: optuna {optuna.__version__}, torch {torch.__version__}, cuda {torch.cuda.is_available()}')"
