#!/usr/bin/env bash
# The vLLM path on NVIDIA GPUs (one H100/H200 is enough), end to end, printing throughput and step time:
#   1. a small Qwen2 model (init-tiny: hidden 512, 4 layers, 4 heads of 128),
#   2. `harness eval --engine vllm`: 128 arith episodes, 64 at once, sampled; generated tokens/s,
#   3. a few GRPO steps with vLLM rollouts and the FSDP2 learner:
#      - 2+ GPUs: learner on GPU 0, vLLM on GPU 1, weights by NCCL broadcast (inference.weight_sync=nccl);
#      - 1 GPU: NCCL cannot put two ranks (learner, vLLM worker) on one device, so the learner and vLLM
#        share it (colocate) and the weights go through vLLM's RPC (weight_sync=load);
#      prints the median step time and its parts (rollout, learner, weight sync).
# Needs the CUDA build of vLLM in this environment: pip install -e '.[vllm,dev]'.
# Usage: scripts/gpu_check.sh [OUT_DIR]   (default runs/gpu-check; STEPS=3 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${1:-runs/gpu-check}
STEPS=${STEPS:-3}
mkdir -p "$OUT"

GPUS=$($PY - <<'EOF'
import sys
try:
    import torch, vllm  # noqa: F401
except ImportError as err:
    sys.exit(f"needs torch with CUDA and vLLM: pip install -e '.[vllm,dev]' ({err})")
if not torch.cuda.is_available():
    sys.exit("no CUDA GPU is visible: this check is for GPU machines (CPU machines: tests/vllm in .venv-vllm)")
print(torch.cuda.device_count())
EOF
)
echo "== $GPUS GPU(s): $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)"

echo "== 1. small model"
$PY -m cli model init-tiny "$OUT/model" --hidden-size 512 --layers 4 --vocab-size 4096

echo "== 2. harness eval --engine vllm"
rm -rf "$OUT/eval"
clock=$(date +%s.%N)
$PY -m cli eval --checkpoint "$OUT/model" --engine vllm --tasks arith --limit 128 --workers 64 \
  --temperature 1.0 --max-tokens 128 --output "$OUT/eval" >"$OUT/eval.log"
$PY - "$OUT/eval" "$clock" <<'EOF'
import json, sys, time
report = json.load(open(f"{sys.argv[1]}/report.json"))
wall = time.time() - float(sys.argv[2])
rows = [json.loads(l) for l in open(f"{sys.argv[1]}/results.jsonl")]
episode_s = sum(r.get("wall_s", 0) for r in rows) / len(rows)
print(f"vLLM eval: {report['episodes']} episodes, {report['total_completion_tokens']} generated tokens, "
      f"{report['total_completion_tokens'] / wall:.0f} tokens/s over the whole command (engine start included), "
      f"mean episode {episode_s:.2f} s")
EOF

echo "== 3. GRPO with vLLM rollouts and the FSDP2 learner"
if [ "$GPUS" -ge 2 ]; then
  PLACEMENT=(trainer.placement.colocate=false trainer.placement.learner_gpus=1 trainer.placement.inference_gpus=1
             inference.weight_sync=nccl)
  echo "   learner on one GPU, vLLM on another, NCCL broadcast"
else
  PLACEMENT=(trainer.placement.colocate=true trainer.placement.learner_gpus=1 inference.weight_sync=load
             inference.gpu_memory_utilization=0.4)
  echo "   one GPU: learner and vLLM colocated; weights through vLLM's RPC (NCCL takes one rank per GPU)"
fi
rm -rf "$OUT/train"
$PY -m cli train "trainer.policy.model.path=$OUT/model" "trainer.output_dir=$OUT/train" 'data.train_data=["arith-train"]' \
  trainer.strategy=fsdp2 trainer.train_batch_size=16 generator.n_samples_per_prompt=8 generator.max_tokens=128 \
  generator.max_context=1024 data.max_prompt_length=512 trainer.learning_rate=1e-5 trainer.eval_interval=0 "trainer.max_steps=$STEPS" \
  inference.backend=vllm "${PLACEMENT[@]}" | tee "$OUT/train.log"
$PY - "$OUT/train" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(f"{sys.argv[1]}/metrics.jsonl") if "time/rollout_s" in l]
med = lambda key: statistics.median(r[key] for r in rows)
parts = ("time/rollout_s", "time/train_s", "time/weight_sync_s")
step = statistics.median(sum(r[p] for p in parts) for r in rows)
print(f"GRPO ({len(rows)} steps, 128 episodes each): step {step:.2f} s median = rollout {med('time/rollout_s'):.2f} + "
      f"learner {med('time/train_s'):.2f} + weight sync {med('time/weight_sync_s'):.3f}; "
      f"rollout {med('throughput/generated_tokens_per_s'):.0f} generated tokens/s")
EOF
echo "== done: $OUT"
