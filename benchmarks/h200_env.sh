# Sourced by the H200 call scripts (benchmarks/h200_*.sh): the environment of the device runs and the wheels the
# device image lacks (.whl/: gguf, tree-sitter(-cuda), ml-collections, tensorboardX), installed once per machine.
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3 CUDAPERF_CACHE=/tmp/cudaperf_cache
[ -d /tmp/site/gguf ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD
