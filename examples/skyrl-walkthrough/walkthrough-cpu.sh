#!/usr/bin/env bash
# The SkyRL walkthrough's five steps with harness, on a CPU with a tiny model (a few minutes).
#
#   bash examples/skyrl-walkthrough/walkthrough-cpu.sh [WORK_DIR]
#
# Settings (environment): HARNESS (the command; default `harness`), GSM8K_SOURCE (hf, or a folder of GSM8K's
# train/test JSONL), DATA_DIR (default ~/data/gsm8k), STEPS (GRPO steps, default 2), RUNTIME (docker or local),
# REPO (the repository of step 5; default: a small one with a bug, made here).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mkdir -p "${1:-runs/skyrl-walkthrough}" && cd "${1:-runs/skyrl-walkthrough}" && pwd)
HARNESS=${HARNESS:-harness}
GSM8K_SOURCE=${GSM8K_SOURCE:-hf}
DATA_DIR=${DATA_DIR:-$HOME/data/gsm8k}
STEPS=${STEPS:-2}
RUNTIME=${RUNTIME:-docker}

echo "== 1. the machine and the repository: a tiny model stands in for Qwen2.5-1.5B on this CPU"
$HARNESS model init-tiny "$WORK/tiny-model"

echo "== 2. data: train.parquet and validation.parquet, row for row as SkyRL's gsm8k_dataset.py writes them"
$HARNESS data gsm8k --output-dir "$DATA_DIR" --source "$GSM8K_SOURCE"

echo "== 3. the GRPO YAML: $HERE/gsm8k-grpo.yaml, as written"

echo "== 4. train: SkyRL's command line; the CPU overrides replace the GPUs, vLLM and W&B; a short run"
$HARNESS train --config "$HERE/gsm8k-grpo.yaml" trainer.epochs=5 data.train_data="['$DATA_DIR/train.parquet']" \
    data.val_data="['$DATA_DIR/validation.parquet']" \
    trainer.policy.model.path="$WORK/tiny-model" \
    trainer.placement.policy_num_gpus_per_node=0 inference.backend=transformers logger=tensorboard \
    trainer.ckpt_path="$WORK/run" trainer.max_training_steps="$STEPS" trainer.train_batch_size=2 \
    trainer.policy_mini_batch_size=1 generator.n_samples_per_prompt=2 generator.sampling_params.max_generate_length=16
# (policy_mini_batch_size: 2 optimizer steps per batch, as run_gsm8k.sh's 256 of 1024 prompts gives 4)
CHECKPOINT="$WORK/run/checkpoints/global_step_$STEPS"

echo "== 5a. evaluate the checkpoint on held-out GSM8K"
$HARNESS eval --checkpoint "$CHECKPOINT" --tasks "$DATA_DIR/validation.parquet" --limit 4 --max-tokens 16 \
    --output "$WORK/eval"

echo "== 5b. the checkpoint as an agent on a repository"
REPO=${REPO:-$WORK/repo-x}
if [ ! -d "$REPO" ]; then
    mkdir -p "$REPO/tests"
    printf 'def add(a, b):\n    return a - b\n' > "$REPO/calc.py"
    printf 'from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n' > "$REPO/tests/test_calc.py"
    git -C "$REPO" init -q -b main
    git -C "$REPO" add -A
    git -C "$REPO" -c user.name=walkthrough -c user.email=walkthrough@localhost commit -q -m "repo X"
fi
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" python3 "$HERE/run_on_repo.py" "$CHECKPOINT" --repo "$REPO" \
    --prompt "Fix this bug in repo X: add(2, 3) returns -1." --test "python3 -m pytest -q tests/test_calc.py" \
    --max-turns 3 --max-tokens 16 --runtime "$RUNTIME" --patch-out "$WORK/agent.patch"
echo "== done: $WORK"
