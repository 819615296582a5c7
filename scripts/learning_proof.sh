#!/usr/bin/env bash
# Proof that the trainer learns, on a CPU: a tiny model, SFT warm start, then GRPO, on generated arithmetic
# word problems in the GSM8K format; first single-turn, then through the multi-turn `python` + `submit` tool
# task in sandboxes. Prints the held-out reward before and after GRPO; each run folder holds
# reward_curve.png, metrics.jsonl and the final Hugging Face checkpoint.
#
#   bash scripts/learning_proof.sh [single|tool|both|plateau|swe] [OVERRIDES]     (default: both)
#
# `plateau`: arith from an SFT plateau: a fresh tiny model, SFT on 200 gold answers until more SFT stays flat
# on arith-val, then GRPO on the 2,000 arith-train prompts against SFT continued for the same time, over seeds
# (scripts/rl_proof.py --family arith; its options, e.g. --seeds 0 --grpo-steps 30, follow `plateau`).
# `swe`: the same protocol on generated swe-tiny repo-fix tasks (real episodes in sandboxes, graded by the
# SWE-bench grader), from arith-tool's SFT stage (scripts/rl_proof.py --family swe).
#
# OVERRIDES (dotted config keys, e.g. trainer.max_steps=5) apply to the GRPO runs of `single` and `tool`.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-both}
overrides=("${@:2}")
runs=${RUNS_DIR:-runs}
model=$runs/arith-tiny-model
tool_model=$runs/arith-tool-tiny-model  # 4 layers, and a tokenizer fitted to tool calls: it learns to copy through them

episodes() {  # task set, policy, N (its first N tasks), keep, folder: generated once, then reused
  # (examples/swe on the path: the scripted test-editing hacker is a policy from there)
  [ -f "$runs/$5/trajectories.parquet" ] || PYTHONPATH=examples/swe${PYTHONPATH:+:$PYTHONPATH} harness generate \
      --checkpoint "$2" --tasks "$1" --limit "$3" --backend local --workers 8 --keep "$4" --output "$runs/$5"
}

report() {  # the held-out curve of one run, and its wall time
  python3 - "$1" "$2" <<'PY'
import json, sys
run, seconds = sys.argv[1], int(sys.argv[2])
curve = [(m["step"], m["val/reward_mean"]) for m in map(json.loads, open(f"{run}/metrics.jsonl")) if "val/reward_mean" in m]
if not curve:  # run with data.val_data=[]
    print(f"\n{run}: no held-out evaluation; {seconds // 60} min {seconds % 60} s")
    sys.exit(0)
print(f"\n{run}: held-out reward by step: " + "  ".join(f"{s}:{r:.2f}" for s, r in curve))
print(f"{run}: after the SFT warm start {curve[0][1]:.2f}, after GRPO {curve[-1][1]:.2f} (best {max(r for _, r in curve):.2f}); "
      f"{seconds // 60} min {seconds % 60} s; curve: {run}/reward_curve.png")
PY
}

tool_sft() {  # arith-tool's stage 1 (SFT only): tool calls, and numbers copied into them (also the swe proof's stage 0)
  local stage=$runs/arith-tool-sft-tiny-cpu
  if [ -f "$stage/checkpoints/global_step_0/config.json" ]; then echo "reusing $stage"; return; fi
  [ -f "$tool_model/config.json" ] || harness model init-tiny "$tool_model" --hidden-size 128 --layers 4 --tool-use
  episodes arith-tool-train gold 2000 rewarded arith-tool-gold               # python, then submit
  harness train --config examples/arith/arith-tool-sft-tiny-cpu.yaml trainer.policy.model.path="$tool_model" \
      trainer.output_dir="$stage" trainer.resume=never trainer.sft_warmup.data="[\"$runs/arith-tool-gold/trajectories.parquet\"]"
}

if [ "$which" = single ] || [ "$which" = both ]; then
  start=$SECONDS
  [ -f "$model/config.json" ] || harness model init-tiny "$model" --hidden-size 128
  harness train --config examples/arith/arith-grpo-tiny-cpu.yaml trainer.policy.model.path="$model" \
      trainer.output_dir="$runs/arith-grpo" trainer.resume=never "${overrides[@]}"
  report "$runs/arith-grpo" $((SECONDS - start))
fi

if [ "$which" = tool ] || [ "$which" = both ]; then
  start=$SECONDS
  tool_sft  # Stage 1: SFT only, until the model computes with the tool and copies its result.
  episodes arith-tool-train gold 700 rewarded arith-tool-gold-700
  episodes arith-tool-train gold-no-tools 1300 rewarded arith-tool-no-tools  # submit at once
  # Stage 2: a warm start that mostly answers without the tool, then GRPO.
  harness train --config examples/arith/arith-tool-grpo-tiny-cpu.yaml \
      trainer.policy.model.path="$runs/arith-tool-sft-tiny-cpu/checkpoints/global_step_0" \
      trainer.output_dir="$runs/arith-tool-grpo" trainer.resume=never \
      trainer.sft_warmup.data="[\"$runs/arith-tool-gold-700/trajectories.parquet\", \"$runs/arith-tool-no-tools/trajectories.parquet\"]" \
      "${overrides[@]}"
  report "$runs/arith-tool-grpo" $((SECONDS - start))
fi

if [ "$which" = plateau ]; then
  start=$SECONDS
  [ -f "$model/config.json" ] || harness model init-tiny "$model" --hidden-size 128
  python3 scripts/rl_proof.py --family arith --runs "$runs" --start "$model" "${overrides[@]}"
  echo "$((SECONDS - start)) s; report: $runs/arith-proof.json, $runs/arith-proof.png"
fi

if [ "$which" = swe ]; then
  start=$SECONDS
  # Stage 0: arith-tool's SFT stage. A fresh tiny model never learns to copy the digits of the line it must
  # edit (docs/results/learning.md); one that has learned to copy numbers into tool calls on arith-tool does.
  tool_sft
  # Then gold demonstrations, the SFT plateau chosen on swe-tiny-val, and from it GRPO against continued SFT
  # for the same training time, over seeds; both scored on the whole held-out set (scripts/rl_proof.py).
  python3 scripts/rl_proof.py --family swe --runs "$runs" --start "$runs/arith-tool-sft-tiny-cpu/checkpoints/global_step_0" "${overrides[@]}"
  echo "$((SECONDS - start)) s; report: $runs/swe-proof.json, $runs/swe-proof.png"
fi
