"""vLLM everywhere a user expects it, through the real `harness` command: eval, generate, serve, train."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq
import pytest

from tests.cli_helpers import check_openai_endpoint, harness, rows_of, serving

VLLM_START_S = 900  # an engine start on a CPU shared with other work

pytestmark = pytest.mark.timeout(1200)  # a vLLM engine start on a busy CPU


def test_generate_and_eval_with_the_vllm_engine(vllm_model, tmp_path):
    """`harness generate` runs `harness eval` into OUTPUT/run, then writes the dataset: one engine start for both."""
    done = harness(
        "generate",
        "--checkpoint",
        str(vllm_model),
        "--engine",
        "vllm",
        "--tasks",
        "arith",
        "--limit",
        "3",
        "--samples",
        "2",
        "--workers",
        "6",
        "--max-tokens",
        "16",
        "--output",
        str(tmp_path / "data"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run = tmp_path / "data" / "run"
    report = json.loads((run / "report.json").read_text())
    assert report["episodes"] == 6 and report["errors"] == 0 and report["total_completion_tokens"] > 0
    for path in (run / "trajectories").glob("*.json"):
        trajectory = json.loads(path.read_text())
        assert trajectory["token_ids"] and len(trajectory["token_ids"]) == len(trajectory["loss_mask"]) == len(
            trajectory["logprobs"]
        )
        assert all(lp <= 0 for lp, m in zip(trajectory["logprobs"], trajectory["loss_mask"]) if m)
    assert pq.read_table(tmp_path / "data" / "trajectories.parquet").num_rows == 6


def test_serve_with_the_vllm_engine(vllm_model):
    with serving(vllm_model, "--engine", "vllm", startup_s=VLLM_START_S) as url:
        check_openai_endpoint(url)
        import openai

        client = openai.OpenAI(base_url=url, api_key="unused")

        def ask(seed: int):
            return (
                client.chat.completions.create(
                    model="tiny",
                    messages=[{"role": "user", "content": "count to ten"}],
                    max_tokens=12,
                    temperature=1.0,
                    seed=seed,
                )
                .choices[0]
                .message.content
            )

        with ThreadPoolExecutor(4) as pool:  # concurrent requests, served together
            answers = list(pool.map(ask, [1, 2, 3, 1]))
        assert answers[0] == answers[3] and len(set(answers)) > 1

        # streamed as the engine samples: many pieces per choice, adding up to the turn asked for without streaming
        settings = {"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 48, "seed": 4}
        settings |= {"temperature": 1.0, "n": 2}
        plain = client.chat.completions.create(**settings)
        pieces: dict[int, list[str]] = {}
        for chunk in client.chat.completions.create(stream=True, **settings):
            for choice in chunk.choices:
                if choice.delta.content:
                    pieces.setdefault(choice.index, []).append(choice.delta.content)
        for choice in plain.choices:
            assert choice.message.content and "".join(pieces[choice.index]) == choice.message.content
            assert len(pieces[choice.index]) > 3, pieces[choice.index]


def test_grpo_steps_with_vllm_rollouts_and_weight_sync(vllm_model, tmp_path):
    from transformers import AutoModelForCausalLM

    run_dir = tmp_path / "run"
    done = harness(
        "train",
        f"trainer.policy.model.path={vllm_model}",
        f"trainer.output_dir={run_dir}",
        'data.train_data=["arith-train"]',
        "trainer.eval_interval=0",
        "trainer.train_batch_size=2",
        "generator.n_samples_per_prompt=4",
        "generator.max_tokens=12",
        "generator.max_context=512",
        "data.max_prompt_length=256",
        "trainer.learning_rate=1e-3",
        "trainer.max_steps=2",
        "inference.engine=vllm",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    metrics = [m for m in rows_of(run_dir / "metrics.jsonl") if "sft/loss" not in m]
    assert [m["step"] for m in metrics] == [1, 2]
    for step in metrics:
        assert step["time/weight_sync_s"] > 0 and step["throughput/generated_tokens_per_s"] > 0
        assert step["train/response_length_mean"] > 0
        assert "train/reward_mean" in step and ("train/loss" in step or step.get("train/skipped") == 1.0)
    # a random tiny model mostly earns equal rewards (zero advantages, no update): that the synced weights reach vLLM
    # is proven by tests/vllm/test_vllm_engine.py::test_weight_sync_makes_vllm_score_like_the_learner
    AutoModelForCausalLM.from_pretrained(run_dir / "checkpoints" / "global_step_2")  # loadable as it is


def test_eval_on_gsm8k_with_the_real_model(smollm2, tmp_path):
    """SmolLM2-135M-Instruct (imported from its GGUF file) sampled by vLLM's CPU engine."""
    done = harness(
        "eval",
        "--checkpoint",
        str(smollm2),
        "--engine",
        "vllm",
        "--tasks",
        "gsm8k",
        "--limit",
        "2",
        "--max-tokens",
        "48",
        "--output",
        str(tmp_path / "eval"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert report["episodes"] == 2 and report["errors"] == 0 and report["total_completion_tokens"] > 20
    for path in (tmp_path / "eval" / "trajectories").glob("*.json"):
        trajectory = json.loads(path.read_text())
        assert len(trajectory["messages"][-1]["content"].split()) > 5 and trajectory["token_ids"]
