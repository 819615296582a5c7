"""Step 5 of the SkyRL walkthrough: the trained checkpoint as an agent on a repository.

SkyRL's version::

    agent = SkyRLAgent.from_checkpoint("path/to/checkpoint")
    result = agent.run_task(prompt="Fix this bug in repo X: ...", runtime="openhands", max_turns=30)
    print(result.success_rate, result.trajectory)

With harness (the repository is copied into a Docker or bubblewrap sandbox; `--test` judges the patch)::

    python3 examples/skyrl-walkthrough/run_on_repo.py CHECKPOINT --repo PATH --prompt "Fix this bug: ..." \\
        --test "python3 -m pytest -q tests/test_x.py"

`harness run --checkpoint CHECKPOINT --repo PATH "Fix this bug: ..."` does the same from the command line.
"""

from __future__ import annotations

import argparse

from harness.agent import Agent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a checkpoint folder, endpoint:MODEL, empty or replay:PATH")
    parser.add_argument("--repo", required=True, help="the repository to work on (copied, never modified)")
    parser.add_argument("--prompt", required=True, help='the request, e.g. "Fix this bug in repo X: ..."')
    parser.add_argument("--test", default=None, help="a command that exits 0 when the request is met")
    parser.add_argument("--max-turns", type=int, default=30)
    parser.add_argument("--max-tokens", type=int, default=1024, help="tokens per assistant turn")
    parser.add_argument(
        "--runtime", default="docker", choices=["docker", "local", "overlay", "podman", "auto", "openhands"]
    )
    parser.add_argument("--patch-out", default=None, help="write the agent's patch here")
    args = parser.parse_args()

    with Agent.from_checkpoint(args.checkpoint, max_tokens=args.max_tokens) as agent:
        result = agent.run_task(
            prompt=args.prompt, repo=args.repo, runtime=args.runtime, max_turns=args.max_turns, test=args.test
        )
    print("success_rate:", result.success_rate)
    print("exit_status:", result.exit_status)
    print("turns:", result.trajectory.turns)
    print("patch:", f"{len(result.patch.splitlines())} lines" if result.patch else "none")
    for message in result.trajectory.messages:
        print(f"[{message['role']}] {(message.get('content') or '')[:200]!r}")
    if args.patch_out:
        print("patch written to", result.write_patch(args.patch_out))


if __name__ == "__main__":
    main()
