"""`harness train` for real: tiny model, real Ray, real rollouts; resume after SIGKILL; bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.cli_helpers import ROOT, harness, rows_of

TINY_RUN = [
    'data.train_data=["arith-train"]',
    'data.val_data=["arith"]',
    "trainer.train_batch_size=2",
    "generator.n_samples_per_prompt=4",
    "generator.max_tokens=12",
    "trainer.learning_rate=1e-4",
    "trainer.eval_interval=0",
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from harness.tiny_model import init_tiny

    return init_tiny(tmp_path_factory.mktemp("tiny"))


def train_args(model, run_dir, *extra):
    return ["train", f"trainer.policy.model.path={model}", f"trainer.output_dir={run_dir}", *TINY_RUN, *extra]


def test_short_grpo_run_writes_loadable_checkpoints_and_metrics(tiny_model, tmp_path):
    from transformers import AutoModelForCausalLM

    run_dir = tmp_path / "run"
    done = harness(
        *train_args(
            tiny_model,
            run_dir,
            "trainer.max_steps=2",
            "trainer.ckpt_interval=1",
            'trainer.sft_warmup={data: ["arith-train"], epochs: 1, learning_rate: 0.001}',
        )
    )
    assert done.returncode == 0, done.stdout + done.stderr
    metrics = rows_of(run_dir / "metrics.jsonl")
    sft = [m["sft/loss"] for m in metrics if "sft/loss" in m]
    assert len(sft) > 100 and sum(sft[-10:]) < 0.7 * sum(sft[:10])  # the warm start learned
    metrics = [m for m in metrics if "sft/loss" not in m]
    assert [m["step"] for m in metrics] == [0, 1, 2]
    step = metrics[1]
    for key in (
        "train/reward_mean",
        "train/pass_rate",
        "train/advantage_std",
        "train/loss",
        "train/clip_frac",
        "train/grad_norm",
        "train/response_length_mean",
        "time/rollout_s",
        "time/train_s",
        "time/weight_sync_s",
        "throughput/generated_tokens_per_s",
    ):
        assert key in step, key
    assert "val/reward_mean" in metrics[0] and "val/reward_mean" in metrics[-1]
    assert (run_dir / "reward_curve.png").stat().st_size > 1000
    assert list((run_dir / "tensorboard").glob("events.*"))
    checkpoint = run_dir / "checkpoints" / "global_step_2"
    model = AutoModelForCausalLM.from_pretrained(checkpoint)  # as it is, no conversion
    original = AutoModelForCausalLM.from_pretrained(tiny_model)
    changed = any(not torch.equal(a, b) for a, b in zip(model.state_dict().values(), original.state_dict().values()))
    assert changed, "training must change the weights"
    evaluated = harness(
        "eval",
        "--checkpoint",
        str(checkpoint),
        "--tasks",
        "arith",
        "--limit",
        "3",
        "--max-tokens",
        "8",
        "--output",
        str(tmp_path / "eval"),
    )
    assert evaluated.returncode == 0, evaluated.stdout
    assert json.loads((tmp_path / "eval" / "report.json").read_text())["episodes"] == 3


def test_killed_run_resumes_where_it_stopped(tiny_model, tmp_path):
    run_dir = tmp_path / "run"
    args = [
        sys.executable,
        "-m",
        "cli",
        *train_args(tiny_model, run_dir, "trainer.max_steps=4", "trainer.ckpt_interval=1"),
    ]
    process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (run_dir / "checkpoints" / "global_step_2" / "trainer_state.pt").exists():
        assert process.poll() is None, "the run ended before it could be killed"
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    done = harness(*train_args(tiny_model, run_dir, "trainer.max_steps=4", "trainer.ckpt_interval=1"))
    assert done.returncode == 0, done.stdout + done.stderr
    metrics = rows_of(run_dir / "metrics.jsonl")
    steps = [m["step"] for m in metrics]
    assert steps == sorted(set(steps)) and steps[-1] == 4  # nothing lost, nothing logged twice
    assert [m["data/index"] for m in metrics if m["step"] >= 1] == [0, 2, 4, 6]  # the data position carried over
    state = torch.load(run_dir / "checkpoints" / "global_step_4" / "trainer_state.pt", weights_only=False)
    assert state["step"] == 4 and state["data_position"] == {"epoch": 0, "index": 8}
    adam_steps = {int(s["step"]) for s in state["optimizer"]["state"].values()}
    assert adam_steps == {4}, "the optimizer restarted instead of resuming"
    assert state["scheduler"]["last_epoch"] == 4


def test_fresh_start_sets_the_earlier_run_aside_and_fsdp2_ranks_train_and_resume(tiny_model, tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    run_dir = tmp_path / "run"
    first = harness(*train_args(tiny_model, run_dir, "trainer.max_steps=1", "trainer.ckpt_interval=1"))
    assert first.returncode == 0, first.stdout + first.stderr
    fsdp2 = [
        "trainer.strategy=fsdp2",
        "trainer.placement.cpu_ranks=2",
        "trainer.ckpt_interval=1",
        "trainer.algorithm.kl_coef=0.1",
    ]
    fresh = harness(
        *train_args(
            tiny_model,
            run_dir,
            "trainer.max_steps=2",
            "trainer.resume=never",
            *fsdp2,
            'trainer.sft_warmup={data: ["arith-train"], max_steps: 5, learning_rate: 0.001}',
        )
    )
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    [aside] = (run_dir / "previous").iterdir()
    assert [m["step"] for m in rows_of(aside / "metrics.jsonl")] == [0, 1]
    assert (
        aside / "checkpoints" / "global_step_1" / "trainer_state.pt"
    ).exists()  # the earlier run's checkpoints are kept
    metrics = rows_of(run_dir / "metrics.jsonl")
    assert [m["sft/step"] for m in metrics if "sft/step" in m] == [1, 2, 3, 4, 5]
    assert [m["step"] for m in metrics if "sft/step" not in m] == [0, 1, 2]  # the new run's metrics alone
    assert all(m["train/micro_batches"] >= 1 for m in metrics if "train/micro_batches" in m)
    # the KL reference is the warm-started policy (equal to it at the first step), saved for a resume
    reference = load_file(run_dir / "reference" / "model.safetensors")
    base = load_file(Path(tiny_model) / "model.safetensors")
    assert any(not torch.equal(reference[k], base[k]) for k in reference.keys() & base.keys())
    assert [m["train/kl"] for m in metrics if "train/kl" in m][0] == 0.0
    resumed = harness(*train_args(tiny_model, run_dir, "trainer.max_steps=3", *fsdp2))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    metrics = rows_of(run_dir / "metrics.jsonl")
    assert [m["step"] for m in metrics if "sft/step" not in m] == [0, 1, 2, 3]
    # resumed, the reference is still the warm-started policy, not the model before the warm-up (against which the KL is 0.011-0.018 here)
    assert all(m["train/kl"] < 1e-3 for m in metrics if "train/kl" in m), [
        m["train/kl"] for m in metrics if "train/kl" in m
    ]
    state = torch.load(run_dir / "checkpoints" / "global_step_3" / "trainer_state.pt", weights_only=False)
    assert {int(s["step"]) for s in state["optimizer"]["state"].values()} == {
        3
    }  # sharded moments resumed, not restarted
    AutoModelForCausalLM.from_pretrained(
        run_dir / "checkpoints" / "global_step_3"
    )  # whole weights, as a 1-process run writes


def test_sft_only_run_saves_the_warm_started_model(tiny_model, tmp_path):
    from safetensors.torch import load_file

    run_dir = tmp_path / "run"
    done = harness(
        *train_args(
            tiny_model,
            run_dir,
            "trainer.max_steps=0",
            'trainer.sft_warmup={data: ["arith-train"], max_steps: 5, learning_rate: 0.001, lr_scheduler: cosine, '
            "eval_interval: 2}",
        )
    )
    assert done.returncode == 0, done.stdout + done.stderr
    metrics = rows_of(run_dir / "metrics.jsonl")
    assert [m["sft/step"] for m in metrics if "sft/step" in m] == [1, 2, 3, 4, 5]
    # validated every 2 warm-up steps and after the last, each such model saved; sft_best names the best (earliest on a tie)
    validated = {m["sft/step"]: m["sft/val_pass_rate"] for m in metrics if "sft/val_pass_rate" in m}
    assert sorted(validated) == [2, 4, 5]
    best = max(sorted(validated), key=lambda step: validated[step])
    assert (run_dir / "checkpoints" / "sft_best").read_text().strip() == f"sft_step_{best}"
    assert all((run_dir / "checkpoints" / f"sft_step_{step}" / "config.json").is_file() for step in validated)
    rates = [m["sft/lr"] for m in metrics if "sft/step" in m]  # cosine over the warm-up's own 5 steps, from the peak
    assert rates[0] == 0.001 and all(a > b > 0 for a, b in zip(rates, rates[1:])) and rates[-1] < 0.0001
    assert [m["step"] for m in metrics if "sft/step" not in m] == [0]  # the warm start's held-out reward, no GRPO step
    before = load_file(Path(tiny_model) / "model.safetensors")
    after = load_file(run_dir / "checkpoints" / "global_step_0" / "model.safetensors")
    shared = before.keys() & after.keys()
    assert "model.embed_tokens.weight" in shared and any(not torch.equal(before[k], after[k]) for k in shared)


def test_bad_inputs_fail_clearly_without_a_traceback(tiny_model, tmp_path):
    missing_model = harness(
        "train",
        "trainer.policy.model.path=/nonexistent/model",
        'data.train_data=["arith-train"]',
        f"trainer.output_dir={tmp_path / 'a'}",
    )
    assert missing_model.returncode == 1 and "trainer.policy.model.path" in missing_model.stdout
    missing_data = harness(
        "train",
        f"trainer.policy.model.path={tiny_model}",
        'data.train_data=["/nonexistent/train.parquet"]',
        f"trainer.output_dir={tmp_path / 'b'}",
    )
    assert missing_data.returncode == 1 and "/nonexistent/train.parquet" in missing_data.stdout
    bad_key = harness("train", f"trainer.policy.model.path={tiny_model}", "trainer.epoch=3")
    assert bad_key.returncode == 1 and "trainer.epochs" in bad_key.stdout
    for result in (missing_model, missing_data, bad_key):
        assert "Traceback" not in result.stdout + result.stderr


def test_exploding_update_stops_with_a_clear_message_and_no_bad_checkpoint(tiny_model, tmp_path):
    run_dir = tmp_path / "run"
    done = harness(
        *train_args(
            tiny_model,
            run_dir,
            "trainer.max_steps=3",
            "trainer.ckpt_interval=1",
            "trainer.max_grad_norm=0",
            'trainer.sft_warmup={data: ["arith-train"], epochs: 1, learning_rate: 1.0e+30}',
        )
    )
    assert done.returncode == 1 and "non-finite" in done.stdout, done.stdout + done.stderr
    for checkpoint in (run_dir / "checkpoints").glob("global_step_*"):
        weights = __import__("safetensors.torch", fromlist=["load_file"]).load_file(checkpoint / "model.safetensors")
        assert all(torch.isfinite(w).all() for w in weights.values()), f"{checkpoint} holds non-finite weights"


def test_sft_on_generated_trajectories_lowers_the_loss(tiny_model, tmp_path, docker_backend):
    from transformers import AutoTokenizer

    from trainer.learner import Learner, LearnerSettings
    from tasks.taskset import load_tasks
    from trainer.sft import examples_from_parquet, make_batches

    done = harness(
        "generate",
        "--checkpoint",
        "gold",
        "--tasks",
        "arith-tool-train",
        "--limit",
        "8",
        "--output",
        str(tmp_path / "data"),
    )
    assert done.returncode == 0, done.stdout
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    examples = examples_from_parquet(tmp_path / "data" / "trajectories.parquet", tokenizer)
    assert len(examples) == 8 and all(0 < sum(mask) < len(ids) for ids, mask in examples)
    first_ids, first_mask = examples[0]
    taught = tokenizer.decode([t for t, m in zip(first_ids, first_mask) if m])
    assert (
        '"name": "python"' in taught and '"name": "submit"' in taught and "<tool_response>" not in taught
    )  # the assistant's calls only
    # The prompt is rendered with the tool schemas the episode offered, exactly as the policy saw it.
    from harness.tokens import render
    from harness.tools import schemas

    prompt = list(
        render(
            tokenizer,
            [{"role": "user", "content": load_tasks("arith-tool-train")[0].prompt[0]["content"]}],
            schemas(["python", "submit"]),
            True,
            True,
        )
    )
    assert first_ids[: len(prompt)] == prompt and "<tools>" in tokenizer.decode(prompt)
    learner = Learner(tiny_model, LearnerSettings(learning_rate=3e-3, micro_batch_size=8))
    batches = make_batches(examples, 8, tokenizer.pad_token_id, seed=0)
    losses = [learner.sft_step(batches[0], lr=3e-3)["sft/loss"] for _ in range(15)]
    assert losses[-1] < 0.5 * losses[0]


def test_gold_demonstrations_train_on_the_reference_answers_exactly_as_the_task_set_does(tiny_model, tmp_path):
    """`harness generate --checkpoint gold` on a GSM8K-format set writes the reference solution, and SFT on that
    Parquet trains on the same tokens as SFT on the task set's references: the reply through its end token, not the
    newline the template writes after it."""
    from transformers import AutoTokenizer

    from harness.tokens import turn_end
    from tasks.taskset import load_tasks
    from trainer.sft import examples_from_parquet, examples_from_tasks

    done = harness(
        "generate", "--checkpoint", "gold", "--tasks", "arith-train", "--limit", "6", "--output", str(tmp_path)
    )
    assert done.returncode == 0, done.stdout
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    end_id = tokenizer.convert_tokens_to_ids(turn_end(tokenizer))
    trained = lambda examples: sorted([t for t, m in zip(ids, mask) if m] for ids, mask in examples)  # noqa: E731
    from_parquet = trained(examples_from_parquet(tmp_path / "trajectories.parquet", tokenizer))
    from_tasks = trained(examples_from_tasks(load_tasks("arith-train")[:6], tokenizer))
    assert from_parquet == from_tasks
    assert all(reply[-1] == end_id and "\n#### " in tokenizer.decode(reply) for reply in from_parquet)


def test_async_path_with_nothing_ahead_repeats_the_synchronous_steps(tiny_model, tmp_path):
    """Staleness 0 runs the whole asynchronous path (rollouts through RolloutsAhead, the decoupled loss with its
    importance weights) on-policy: any difference from the synchronous run would be the path's own error."""
    runs = {}
    for name, extra in {"sync": [], "async": ["trainer.async.enabled=true", "trainer.async.staleness=0"]}.items():
        done = harness(
            *train_args(
                tiny_model,
                tmp_path / name,
                "trainer.max_steps=3",
                "trainer.learning_rate=1e-2",
                "trainer.algorithm.filter_zero_variance=false",
                *extra,
            )
        )
        assert done.returncode == 0, done.stdout + done.stderr
        runs[name] = [m for m in rows_of(tmp_path / name / "metrics.jsonl") if m["step"] > 0]
    assert [m["async/staleness"] for m in runs["async"]] == [0.0, 0.0, 0.0]
    assert [m["train/is_weight_mean"] for m in runs["async"]] == pytest.approx(
        [1.0] * 3, abs=1e-3
    )  # engine and learner agree
    for ours, theirs in zip(runs["async"], runs["sync"], strict=True):
        assert ours["train/reward_mean"] == theirs["train/reward_mean"]  # the same samples, so the same weights before
        assert ours["train/grad_norm"] == pytest.approx(theirs["train/grad_norm"], rel=1e-3)


def test_short_async_grpo_run_then_a_stuck_rollout_fails_clearly_with_the_checkpoint_intact(tiny_model, tmp_path):
    from transformers import AutoModelForCausalLM

    run_dir = tmp_path / "run"
    done = harness(
        *train_args(
            tiny_model,
            run_dir,
            "trainer.max_steps=3",
            "trainer.ckpt_interval=1",
            "trainer.async=1",
            "trainer.algorithm.filter_zero_variance=false",
        )
    )  # so that every step has tokens to train on
    assert done.returncode == 0, done.stdout + done.stderr
    metrics = [m for m in rows_of(run_dir / "metrics.jsonl") if m["step"] > 0]
    # Step 1 trains on rollouts of the starting weights; later steps on rollouts started one update earlier.
    assert [m["async/staleness"] for m in metrics] == [0.0, 1.0, 1.0]
    assert all(0.0 < m["train/is_weight_mean"] <= 2.0 for m in metrics)  # the learner corrected every step's tokens
    assert (run_dir / "checkpoints" / "global_step_3").is_dir()

    stuck = harness(
        *train_args(tiny_model, run_dir, "trainer.max_steps=4", "trainer.async=1", "trainer.deadlines.rollout_s=0.01")
    )
    assert stuck.returncode == 1
    said = " ".join(stuck.stdout.split())
    assert (
        "rollouts of step 4 did not finish within 0.01s (trainer.deadlines.rollout_s)" in said
        and "last checkpoint is intact" in said
    )
    assert not (run_dir / "checkpoints" / "global_step_4").exists()
    AutoModelForCausalLM.from_pretrained(run_dir / "checkpoints" / "global_step_3")


@pytest.mark.parametrize("scaffold", ["mini-swe-agent", "examples.scaffolds.scaffold:bash_agent"])
def test_grpo_through_a_scaffold_trains_on_the_tokens_the_endpoint_recorded(
    tiny_model, tmp_path, docker_backend, scaffold
):
    """One GRPO step whose episodes a scaffold drives (the shipped example config; mini-swe-agent, and the example
    of a user's own scaffold): the batch is the tokens and logprobs the intercepting endpoint recorded, and the
    learner scores them as the engine sampled them. The tiny random model resolves no swe-tiny task, so the task is
    scored by a reward that pays its two episodes 1 and 0 (`tests/trainer/alternating_reward.py`): the group has
    variance, and the step must change the weights."""
    from safetensors.torch import load_file

    from tasks.taskset import load_tasks

    task = load_tasks("swe-tiny-train")[0]
    reward = {"method": "tests.trainer.alternating_reward:alternating", "counter": str(tmp_path / "counter")}
    row = {
        "data_source": task.data_source,
        "prompt": task.prompt,
        "env_class": task.env_class,
        "reward_spec": {**task.reward_spec, **reward},
        "extra_info": task.metadata,
        "tools": task.tools,
        "max_turns": task.max_turns,
        "sandbox": task.sandbox.to_dict(),
    }
    (tmp_path / "task.jsonl").write_text(json.dumps(row) + "\n")
    run_dir = tmp_path / "run"
    done = harness(
        "train",
        "--config",
        "examples/scaffolds/swe-tiny-grpo-mini-swe-agent-tiny-cpu.yaml",
        f"trainer.policy.model.path={tiny_model}",
        f"trainer.output_dir={run_dir}",
        f"data.train_data=[{str(tmp_path / 'task.jsonl')!r}]",
        "trainer.train_batch_size=1",
        "trainer.micro_batch_size=1",
        "generator.n_samples_per_prompt=2",
        f"generator.scaffold={scaffold}",
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [step] = rows_of(run_dir / "metrics.jsonl")
    trajectories = rows_of(run_dir / "rollouts" / "step_000001.jsonl")
    assert step["step"] == 1 and len(trajectories) == 2
    assert sorted(t["reward"] for t in trajectories) == [0.0, 1.0] and step["train/reward_mean"] == 0.5
    name = "bash-agent" if scaffold.endswith(":bash_agent") else scaffold
    for t in trajectories:
        recorded = t["metadata"]["scaffold"]
        assert recorded["name"] == name and t["turns"] == len(recorded["calls"]) >= 1, t["error"]
        assert t["timings"]["policy_s"] > 0 and len(t["token_ids"]) == len(t["loss_mask"]) == len(t["logprobs"])
        segments = [*recorded["token_segments"], t]  # a history the scaffold rewrote starts a new segment
        for call in recorded["calls"]:  # each sampled answer, where the engine continued its segment's prompt
            segment = segments[call["segment"]]
            where = slice(call["prompt_length"], call["prompt_length"] + len(call["token_ids"]))
            assert segment["token_ids"][where] == call["token_ids"] and segment["logprobs"][where] == call["logprobs"]
            assert set(segment["loss_mask"][where]) == {1}
        assert sum(sum(s["loss_mask"]) for s in segments) == sum(len(c["token_ids"]) for c in recorded["calls"])
    if scaffold == "mini-swe-agent":  # it drops a reply without one action from its history: the history is rewritten
        assert any(t["metadata"]["scaffold"]["token_segments"] for t in trajectories)
    sampled = sum(len(c["token_ids"]) for t in trajectories for c in t["metadata"]["scaffold"]["calls"])
    assert step["train/trained_tokens"] == sampled  # every sampled token, and nothing else
    assert step["train/ratio_mean"] == pytest.approx(1.0, abs=1e-5)  # the learner's logprobs are the engine's
    assert step["train/turns_mean"] == sum(t["turns"] for t in trajectories) / 2
    assert step["time/generation_s_summed"] > 0
    before = load_file(tiny_model / "model.safetensors")
    after = load_file(run_dir / "checkpoints" / "global_step_1" / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before), "the step through the scaffold changed nothing"
    assert (run_dir / "checkpoints" / "global_step_1").is_dir()
