"""The learning proof: GRPO against continued SFT, from one SFT plateau, over seeds, on a task family.

    python3 scripts/rl_proof.py --family swe --runs RUNS --start MODEL [--seeds 0 1 2] [--grpo-steps 6] ...
    python3 scripts/rl_proof.py --family arith --runs RUNS --start MODEL

Families (FAMILIES below): `swe`, repo-fix episodes on `swe-tiny` in sandboxes, graded by the SWE-bench grader;
`scripts/learning_proof.sh swe` runs it after building MODEL (arith-tool's SFT stage: a tiny model that has learned
tool calls and to copy numbers into them). `arith`, the single-turn word problems with a fresh tiny model;
`scripts/learning_proof.sh plateau` runs it. Stages, each skipped when its output exists (a killed run resumes
where it stopped):

1. Demonstrations: `harness generate --checkpoint gold` on the first `--demos` tasks of `--demo-tasks` (swe: one
   str_replace_editor edit of the buggy line, then submit; arith: the reference answer). No hacking
   demonstrations. With `--demo-policy miscopy_recovery:RecoversFromAMiscopy` (swe) a third of them first copy the
   line wrong, read the editor's error, and make the right edit; the wrong call is kept out of the loss
   (examples/swe/miscopy_recovery.py).
2. Plateau: SFT on those demonstrations from MODEL at a constant learning rate, validated (greedy) on
   `--val-tasks` every `--sft-eval-interval` steps; the best validation checkpoint is the plateau.
3. Arms, one run per seed (trainer and data seed): GRPO from the plateau on `--rl-tasks` prompts (no answers),
   and SFT continued from the plateau on the same demonstrations for the same training time (learner and
   rollout seconds, evaluations excluded). Both are scored on the whole held-out set (greedy) at the end, and by
   pass@k (`--pass-k` samples per task at GRPO's sampling temperature).
   With `--demo-tasks swe-tiny-sft --rl-tasks swe-tiny-rl`, GRPO's prompts have fixes no demonstration shows; with
   the `swe-tiny-unique` sets (`--demo-tasks swe-tiny-unique-sft --rl-tasks swe-tiny-unique-rl --val-tasks
   swe-tiny-unique-val --heldout swe-tiny-unique`), no two tasks anywhere share a fix.
4. Report: `RUNS/FAMILY-proof.json` and `RUNS/FAMILY-proof.png` (both arms, each seed and the mean).

`--hack-share F` (swe) adds a separate run: the same plateau SFT on demonstrations of which a share F are scripted
test-editing hacks (examples/swe/test_editing_agent.py), then GRPO; the report counts the hack per GRPO step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from harness.evaluate import pass_at_k  # noqa: E402
from trainer.metrics import read_metrics, training_seconds  # noqa: E402

HACKER = "test_editing_agent:EditsTheTests"
RECOVERY = "miscopy_recovery:RecoversFromAMiscopy"
EPOCHS = 100_000  # SFT runs end by their step or seconds cap, never by running out of epochs


@dataclass(frozen=True)
class Family:
    """Where the protocol runs: its configs, its task sets, its defaults and how its held-out set is scored."""

    sft_config: Path  # the plateau's SFT and the control's
    grpo_config: Path
    demo_tasks: str
    rl_tasks: str
    val_tasks: str
    heldout: str
    demos: int
    sft_steps: int
    grpo_steps: int
    temperature: float  # grpo_config's sampling temperature, at which pass@k is sampled
    pass_k: int
    pass_k_tasks: int
    eval_args: tuple[str, ...]
    sft_overrides: tuple[str, ...] = ()
    grpo_overrides: tuple[str, ...] = ()


ARITH_CONFIG = ROOT / "examples/arith/arith-grpo-tiny-cpu.yaml"  # its SFT warm start and its GRPO, used apart here
FAMILIES = {
    "swe": Family(
        sft_config=ROOT / "examples/swe/swe-tiny-sft-tiny-cpu.yaml",
        grpo_config=ROOT / "examples/swe/swe-tiny-grpo-tiny-cpu.yaml",
        demo_tasks="swe-tiny-train",
        rl_tasks="swe-tiny-train",
        val_tasks="swe-tiny-val",
        heldout="swe-tiny",
        demos=600,
        sft_steps=400,
        grpo_steps=6,
        temperature=0.5,
        pass_k=4,
        pass_k_tasks=100,
        eval_args=tuple("--backend local --workers 16 --max-tokens 96 --max-turns 3 --grading-mode refuse".split()),
    ),
    "arith": Family(
        sft_config=ARITH_CONFIG,
        grpo_config=ARITH_CONFIG,
        demo_tasks="arith-train",
        rl_tasks="arith-train",
        val_tasks="arith-val",
        heldout="arith",
        demos=200,
        sft_steps=1500,
        grpo_steps=100,
        temperature=1.0,
        pass_k=8,
        pass_k_tasks=200,
        eval_args=tuple("--engine transformers --workers 64 --max-tokens 16".split()),
        sft_overrides=("trainer.max_steps=0",),
        grpo_overrides=("trainer.sft_warmup=null",),
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", choices=FAMILIES, default="swe", help="the task family (FAMILIES)")
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--start", type=Path, required=True, help="the model the plateau SFT starts from")
    parser.add_argument("--demos", type=int, help="gold demonstrations (the first N --demo-tasks tasks)")
    parser.add_argument("--demo-tasks", help="the task set demonstrated")
    parser.add_argument(
        "--demo-policy",
        default="gold",
        help=f"what writes the demonstrations: gold, or {RECOVERY} (a third of them recover from a miscopied line)",
    )
    parser.add_argument("--rl-tasks", help="GRPO's prompts")
    parser.add_argument("--sft-steps", type=int, help="the plateau's SFT steps")
    parser.add_argument("--sft-eval-interval", type=int, default=50)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--grpo-steps", type=int)
    parser.add_argument("--grpo-prompts", type=int, help="prompts per GRPO step (default: the config's)")
    parser.add_argument("--heldout", help="the held-out set both arms are scored on")
    parser.add_argument("--val-tasks", help="the plateau's validation set")
    parser.add_argument("--pass-k", type=int, help="samples per task for pass@k (0: greedy only)")
    parser.add_argument("--pass-k-tasks", type=int, help="pass@k on the first N held-out tasks")
    parser.add_argument("--hack-share", type=float, default=0.0)
    parser.add_argument(
        "--arms",
        nargs="*",
        default=["grpo", "sft"],
        choices=["grpo", "sft"],
        help="the arms run from the gold plateau; none (with --hack-share): the hack run alone, without that plateau",
    )
    parser.add_argument(
        "--sft-arm-steps",
        type=int,
        help="the control's SFT steps (default: it trains as long as the GRPO run did, by its measured seconds)",
    )
    parser.add_argument(
        "--grpo-lr", type=float, help="GRPO's learning rate (default: the config's); its runs are named by it"
    )
    args = parser.parse_args()
    family = FAMILIES[args.family]
    for name in (
        "demos",
        "demo_tasks",
        "rl_tasks",
        "sft_steps",
        "grpo_steps",
        "heldout",
        "val_tasks",
        "pass_k",
        "pass_k_tasks",
    ):
        if getattr(args, name) is None:  # the family's default
            setattr(args, name, getattr(family, name))
    if not args.arms and not args.hack_share:
        parser.error("--arms with no arm runs only the hack run: give --hack-share too")
    if args.hack_share and args.family != "swe":
        parser.error("--hack-share: the scripted hack edits a repository's tests, so it is for --family swe")
    runs = args.runs.resolve()
    runs.mkdir(parents=True, exist_ok=True)
    prefix = args.family  # of the run folders and the report

    report = {"family": prefix, "arms": {}, "pass_k_temperature": family.temperature}
    if args.arms:
        demos = demonstrations(runs, args.demo_policy, args.demos, args.demo_tasks)
        plateau_run = runs / f"{prefix}-plateau"
        plateau = sft_plateau(plateau_run, args.start, [demos], args)
        report["plateau"] = plateau_summary(plateau_run, plateau)
        report["plateau"]["heldout"] = evaluate(runs / "eval-plateau", plateau, args)
    grpo_name = f"grpo-lr{args.grpo_lr:g}" if args.grpo_lr else "grpo"
    for seed in args.seeds if args.arms else []:
        grpo_run = runs / f"{prefix}-{grpo_name}-seed{seed}"
        if "grpo" in args.arms:
            grpo(grpo_run, plateau, seed, args)
            arm_summary(grpo_run, "grpo", seed, args)
        if "sft" in args.arms:
            budget = (
                training_seconds(read_metrics(grpo_run))
                if (grpo_run / "done").exists() and not args.sft_arm_steps
                else None
            )
            steps = args.sft_arm_steps or (None if budget else args.grpo_steps * 10)
            sft_run = runs / f"{prefix}-sft-seed{seed}"
            continued_sft(sft_run, plateau, demos, seed, steps, budget, args)
            arm_summary(sft_run, "sft", seed, args)
        report["arms"] = collect_arms(runs, args)
        write_report(runs, report)
    if args.hack_share:
        report["hack"] = hack_run(runs, args)
        write_report(runs, report)
    print(json.dumps(summary_table(report), indent=1))
    return 0


def harness(*argv: str, log: Path) -> None:
    """One `harness` command; its output goes to `log`, and a failure stops the proof with the log's tail."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "examples/swe"), os.environ.get("PYTHONPATH")])),
    }
    with open(log, "a") as out:
        done = subprocess.run(
            [sys.executable, "-m", "cli", *argv], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    if done.returncode:
        raise SystemExit(f"harness {argv[0]} failed (exit {done.returncode}); see {log}:\n" + log.read_text()[-3000:])


def demonstrations(runs: Path, policy: str, count: int, tasks: str, label: str | None = None) -> Path:
    """`count` episodes of `policy` on `tasks`, in `RUNS/TASKS-LABEL-COUNT` (swe-tiny-train's as `swe-tiny-...`);
    only rewarded ones are kept, except the hacker's."""
    label = label or policy.rpartition(":")[2]
    folder = runs / f"{tasks.replace('-train', '')}-{label}-{count}"
    data = folder / "trajectories.parquet"
    if not data.exists():
        keep = "all" if policy == HACKER else "rewarded"
        harness(
            "generate",
            "--checkpoint",
            policy,
            "--tasks",
            tasks,
            "--limit",
            str(count),
            "--backend",
            "local",
            "--workers",
            "8",
            "--keep",
            keep,
            "--output",
            str(folder),
            log=runs / "generate.log",
        )
    return data


def train(run: Path, config: Path, *overrides: str) -> None:
    if (run / "done").exists():
        return
    harness(
        "train",
        "--config",
        str(config),
        f"trainer.output_dir={run}",
        "trainer.resume=auto",
        *overrides,
        log=run.with_suffix(".log"),
    )
    (run / "done").write_text("")


def sft_plateau(run: Path, start: Path, data: list[Path], args) -> Path:
    family = FAMILIES[args.family]
    train(
        run,
        family.sft_config,
        *family.sft_overrides,
        f"trainer.policy.model.path={start}",
        f"trainer.sft_warmup.data={json.dumps([str(d) for d in data])}",
        f"trainer.sft_warmup.max_steps={args.sft_steps}",
        f"trainer.sft_warmup.epochs={EPOCHS}",
        f"trainer.sft_warmup.eval_interval={args.sft_eval_interval}",
        f"data.val_data={json.dumps([args.val_tasks])}",
    )
    return run / "checkpoints" / (run / "checkpoints" / "sft_best").read_text().strip()


def grpo(run: Path, start: Path, seed: int, args) -> None:
    family = FAMILIES[args.family]
    train(
        run,
        family.grpo_config,
        *family.grpo_overrides,
        f"trainer.policy.model.path={start}",
        f"trainer.max_steps={args.grpo_steps}",
        *([f"trainer.train_batch_size={args.grpo_prompts}"] if args.grpo_prompts else []),
        f"trainer.seed={seed}",
        f"data.seed={seed}",
        f"data.train_data={json.dumps([args.rl_tasks])}",
        "data.val_data=[]",
        *([f"trainer.learning_rate={args.grpo_lr}"] if args.grpo_lr else []),
    )


def continued_sft(
    run: Path, start: Path, demos: Path, seed: int, steps: int | None, seconds: float | None, args
) -> None:
    """SFT from the plateau for `steps` steps, or for `seconds` of training steps (measured as it runs)."""
    family = FAMILIES[args.family]
    train(
        run,
        family.sft_config,
        *family.sft_overrides,
        f"trainer.policy.model.path={start}",
        f"trainer.sft_warmup.data={json.dumps([str(demos)])}",
        f"trainer.sft_warmup.max_steps={steps or 'null'}",
        f"trainer.sft_warmup.max_seconds={seconds or 'null'}",
        f"trainer.sft_warmup.epochs={EPOCHS}",
        "trainer.sft_warmup.eval_interval=null",
        "data.val_data=[]",
        f"trainer.seed={seed}",
        f"data.seed={seed}",
    )


def final_checkpoint(run: Path) -> Path:
    found = sorted((run / "checkpoints").glob("global_step_*"), key=lambda p: int(p.name.rsplit("_", 1)[1]))
    return found[-1]


def evaluate(out: Path, checkpoint: Path, args) -> dict:
    """Greedy resolve rate on the whole held-out set, and pass@k from `--pass-k` samples at GRPO's sampling
    temperature on its first `--pass-k-tasks` tasks."""
    scores = {"pass@k": {}}
    for name, extra in evaluations(args):
        folder = out / name
        if not (folder / "report.json").exists():
            harness(
                "eval",
                "--checkpoint",
                str(checkpoint),
                "--tasks",
                args.heldout,
                *FAMILIES[args.family].eval_args,
                "--output",
                str(folder),
                "--force",
                *extra,
                log=out.with_suffix(".log"),
            )
        report = json.loads((folder / "report.json").read_text())
        if name == "greedy":
            scores["greedy"] = report["resolve_rate"]
        else:
            per_task = report["per_task"].values()
            scores["pass@k"] = {
                k: statistics.fmean(pass_at_k(t["samples"], t["resolved"], k) for t in per_task)
                for k in range(1, args.pass_k + 1)
            }
    return scores


def evaluations(args) -> list[tuple[str, list[str]]]:
    """The evaluations of each checkpoint, by folder name: greedy, and the pass@k samples unless `--pass-k 0`."""
    sampled = [
        "--samples",
        str(args.pass_k),
        "--temperature",
        str(FAMILIES[args.family].temperature),
        "--limit",
        str(args.pass_k_tasks),
    ]
    return [("greedy", [])] + ([("sampled", sampled)] if args.pass_k else [])


def plateau_summary(run: Path, plateau: Path) -> dict:
    curve = [(m["sft/step"], m["sft/val_pass_rate"]) for m in read_metrics(run) if "sft/val_pass_rate" in m]
    return {"checkpoint": str(plateau), "validation_curve": curve}


def arm_summary(run: Path, arm: str, seed: int, args) -> dict:
    rows = read_metrics(run)
    seconds = training_seconds(rows)
    summary = {
        "seed": seed,
        "run": str(run),
        "train_seconds": round(seconds, 1),
        "heldout": evaluate(run / "eval-final", final_checkpoint(run), args),
    }
    if arm == "grpo":
        summary["train_reward_by_step"] = [round(m["train/reward_mean"], 3) for m in rows if "train/reward_mean" in m]
    else:
        summary["sft_steps"] = sum(1 for m in rows if "sft/step" in m)
    return summary


def collect_arms(runs: Path, args) -> dict[str, list[dict]]:
    """Every evaluated arm run in `runs` (`FAMILY-ARM-seedN`, from this or an earlier invocation), by arm."""
    arms: dict[str, list[dict]] = {}
    for run in sorted(runs.glob(f"{args.family}-*-seed*")):
        arm, _, seed = run.name.removeprefix(f"{args.family}-").rpartition("-seed")
        evaluated = all((run / "eval-final" / name / "report.json").exists() for name, _ in evaluations(args))
        if evaluated and arm != "grpo-hack":
            arms.setdefault(arm, []).append(arm_summary(run, "sft" if arm == "sft" else "grpo", int(seed), args))
    return arms


def hack_run(runs: Path, args) -> dict:
    """A plateau SFT on gold demonstrations with a minority of test-editing hacks mixed in, then GRPO."""
    hacks = round(args.demos * args.hack_share)
    gold = demonstrations(runs, "gold", args.demos - hacks, args.demo_tasks)
    hacked = demonstrations(runs, HACKER, hacks, args.demo_tasks, label="hack")
    plateau_run = runs / "swe-plateau-hack"
    plateau = sft_plateau(plateau_run, args.start, [gold, hacked], args)
    run = runs / "swe-grpo-hack"
    grpo(run, plateau, args.seeds[0], args)
    from harness.viewer.hacking import count
    from infra.runlog import read_rows

    per_step = [count(read_rows(path)) for path in sorted((run / "rollouts").glob("step_*.jsonl"))]
    return {
        "demonstrations": {"gold": args.demos - hacks, "hack": hacks},
        "plateau": str(plateau),
        "test_edit_tried_by_step": [c["test_edit"]["tried"] for c in per_step],
        "rewarded_by_step": [c["rewarded"] for c in per_step],
        "hacks_rewarded": sum(
            c[kind]["rewarded"]
            for c in per_step
            for kind in ("test_edit", "test_config", "git_history", "neutralized", "policy_refusal", "forged_log")
        ),
    }


def summary_table(report: dict) -> dict:
    out = {"plateau": report["plateau"]["heldout"]} if "plateau" in report else {}
    for arm, seeds in report["arms"].items():
        greedy = [s["heldout"]["greedy"] for s in seeds]
        out[arm] = {
            "greedy": greedy,
            "mean": statistics.fmean(greedy),
            "spread": (max(greedy) - min(greedy)) if len(greedy) > 1 else None,
        }
    return out


def write_report(runs: Path, report: dict) -> None:
    (runs / f"{report['family']}-proof.json").write_text(
        json.dumps(report | {"summary": summary_table(report)}, indent=1)
    )
    if "plateau" in report:  # the arms' plot (a hack run alone has none)
        plot(runs, report)


def plot(runs: Path, report: dict) -> None:
    """The plateau's validation curve (its checkpoint marked), then the held-out greedy rate of each arm (each seed a
    dot, the mean a bar, the plateau a line) and pass@k. Without pass@k samples for the plateau (`--pass-k 0`), no
    pass@k panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = report["plateau"]["heldout"]
    sampled = bool(start["pass@k"])
    figure, axes = plt.subplots(1, 3 if sampled else 2, figsize=(15 if sampled else 10, 4))
    curve, left, right = axes[0], axes[1], axes[-1]
    steps, rates = zip(*report["plateau"]["validation_curve"])
    chosen = int(report["plateau"]["checkpoint"].rsplit("_", 1)[1])
    curve.plot(steps, rates, marker=".", color="grey")
    curve.scatter([chosen], [dict(zip(steps, rates))[chosen]], color="black", zorder=3, label="the plateau checkpoint")
    curve.set_xlabel("SFT step")
    curve.set_ylabel("validation rate (greedy)")
    curve.set_ylim(0, 1)
    curve.legend(loc="lower right")
    colours = dict(zip(report["arms"], ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]))
    for position, (arm, seeds) in enumerate(report["arms"].items()):
        greedy = [s["heldout"]["greedy"] for s in seeds]
        left.bar(position, statistics.fmean(greedy), color=colours[arm], alpha=0.4)
        left.scatter([position] * len(greedy), greedy, color=colours[arm], zorder=3)
        for seed in seeds if sampled else []:
            points = seed["heldout"]["pass@k"]
            if not points:  # an arm scored greedily only
                continue
            right.plot(
                [int(k) for k in points],
                list(points.values()),
                marker="o",
                color=colours[arm],
                alpha=0.6,
                label=f"{arm} seed {seed['seed']}",
            )
    left.axhline(start["greedy"], color="grey", linestyle="--", label="plateau (start of both arms)")
    labels = [f"{arm}\n({len(s)} seed{'s' if len(s) > 1 else ''})" for arm, s in report["arms"].items()]
    left.set_xticks(range(len(report["arms"])), labels)
    left.set_ylabel("held-out resolve rate (greedy)")
    left.set_ylim(0, 1)
    left.legend(loc="lower right")
    if sampled:
        right.plot(
            [int(k) for k in start["pass@k"]],
            list(start["pass@k"].values()),
            color="grey",
            linestyle="--",
            label="plateau",
        )
        right.set_xlabel("k")
        right.set_ylabel(f"held-out pass@k (temperature {report['pass_k_temperature']:g})")
        right.set_ylim(0, 1)
        right.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(runs / f"{report['family']}-proof.png", dpi=100)
    plt.close(figure)


if __name__ == "__main__":
    raise SystemExit(main())
