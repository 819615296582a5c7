#!/usr/bin/env bash
# Proof that the trainer learns, on a CPU: a tiny model, SFT warm start, then GRPO, on generated arithmetic
# word problems in the GSM8K format; first single-turn, then through the multi-turn `python` + `submit` tool
# task in sandboxes (that half does not show learning yet: see the README). Prints the held-out reward before and after GRPO; each run folder holds
# reward_curve.png, metrics.jsonl and the final Hugging Face checkpoint.
#
#   bash scripts/learning_proof.sh [single|tool|both]      (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-both}
runs=${RUNS_DIR:-runs}
model=$runs/arith-tiny-model

[ -f "$model/config.json" ] || harness model init-tiny "$model" --hidden-size 128

report() {  # the held-out curve of one run, and its wall time
  python3 - "$1" "$2" <<'PY'
import json, sys
run, seconds = sys.argv[1], int(sys.argv[2])
curve = [(m["step"], m["val/reward_mean"]) for m in map(json.loads, open(f"{run}/metrics.jsonl")) if "val/reward_mean" in m]
print(f"\n{run}: held-out reward by step: " + "  ".join(f"{s}:{r:.2f}" for s, r in curve))
print(f"{run}: after the SFT warm start {curve[0][1]:.2f}, after GRPO {curve[-1][1]:.2f} (best {max(r for _, r in curve):.2f}); "
      f"{seconds // 60} min {seconds % 60} s; curve: {run}/reward_curve.png")
PY
}

if [ "$which" = single ] || [ "$which" = both ]; then
  start=$SECONDS
  harness train --config examples/arith/arith-grpo-tiny-cpu.yaml trainer.policy.model.path="$model" \
      trainer.output_dir="$runs/arith-grpo" trainer.resume=never
  report "$runs/arith-grpo" $((SECONDS - start))
fi

if [ "$which" = tool ] || [ "$which" = both ]; then
  start=$SECONDS
  [ -f "$runs/arith-tool-sft/trajectories.parquet" ] || harness generate --checkpoint gold --tasks arith-tool-train \
      --backend local --workers 8 --keep rewarded --output "$runs/arith-tool-sft"
  harness train --config examples/arith/arith-tool-grpo-tiny-cpu.yaml trainer.policy.model.path="$model" \
      trainer.output_dir="$runs/arith-tool-grpo" trainer.resume=never \
      trainer.sft_warmup.data="[\"$runs/arith-tool-sft/trajectories.parquet\"]"
  report "$runs/arith-tool-grpo" $((SECONDS - start))
fi
