"""Worked example: a multi-turn terminal task, graded by a hidden check script in a fresh sandbox.

The agent gets bash and the file editor in a sandbox and must write a command-line program (say
`/work/bin/greet`). Its outcome is that program's text; the reward function copies it into a *fresh*
sandbox and runs the task's hidden check script there (`reward_spec.ground_truth`), which the agent
never sees and cannot touch. Written only against `harness.api`.

    harness --plugin examples.environments.cli_program eval --checkpoint gold --tasks examples/environments/cli_program.jsonl
"""

from __future__ import annotations

import shlex

from harness.api import Reward, ToolEnvironment, register_kind, register_reward, tool_turn


class CLIProgramEnvironment(ToolEnvironment):
    """bash and the editor in a sandbox; the outcome is the program the agent left at `reward_spec.program`."""

    def init(self):
        messages = super().init()  # starts the sandbox
        self.sandbox.exec("mkdir -p /work/bin", timeout=30)
        return messages

    def finish(self) -> Reward:
        if self.sandbox is None:
            return Reward(0.0, {"reason": "the sandbox never started"})
        program = shlex.quote(self.task.reward_spec["program"])
        found = self.sandbox.exec(f"test -f {program} && cat {program}", timeout=30)
        self.outcome = found.output if found.exit_code == 0 else ""
        return super().finish()  # the reward function reward_spec.method names


@register_reward("hidden_check")
def hidden_check(task, outcome, backend) -> Reward:
    """Run the hidden check script against the submitted program, in a fresh sandbox."""
    program = task.reward_spec["program"]
    if not outcome:
        return Reward(0.0, {"reason": f"no program at {program}"})
    with backend.create(task.sandbox) as sandbox:  # nothing the agent did survives here but the program
        sandbox.write_file(program, outcome, mode=0o755)
        sandbox.write_file("/tmp/hidden_check.sh", task.reward_spec["ground_truth"], mode=0o700)
        result = sandbox.exec("bash -e /tmp/hidden_check.sh", timeout=60)
    return Reward(1.0 if result.ok else 0.0, {"exit_code": result.exit_code, "check_output": result.output[-2000:]})


def gold(task, use_tools: bool):
    """The reference program, written with the editor, tried once, submitted."""
    if not use_tools:
        raise ValueError("a program cannot be written without tools")
    program = task.reward_spec["program"]
    return [
        tool_turn("str_replace_editor", command="create", path=program, file_text=task.metadata["solution"]),
        tool_turn("bash", command=f"chmod +x {program} && {program} {task.metadata['example']}"),
        tool_turn("submit"),
    ]


register_kind("cli_program", CLIProgramEnvironment, gold=gold, reward="hidden_check")


# -- the task set (python -m examples.environments.cli_program writes cli_program.jsonl) -----------------

PROGRAMS = [  # name, what it must do, an example argument list, a reference solution, the hidden check
    (
        "greet",
        "prints `Hello, NAME!` for its first argument NAME",
        "Ada",
        '#!/bin/sh\necho "Hello, $1!"\n',
        'test "$(/work/bin/greet Zoe)" = "Hello, Zoe!"\ntest "$(/work/bin/greet "Mary Ann")" = "Hello, Mary Ann!"\n',
    ),
    (
        "add",
        "prints the sum of its integer arguments (0 when there are none)",
        "2 3",
        "#!/usr/bin/env python3\nimport sys\nprint(sum(int(a) for a in sys.argv[1:]))\n",
        'test "$(/work/bin/add 4 5 6)" = 15\ntest "$(/work/bin/add -7 7)" = 0\ntest "$(/work/bin/add)" = 0\n',
    ),
    (
        "shout",
        "prints its arguments, separated by spaces, in upper case",
        "hi there",
        "#!/bin/sh\necho \"$*\" | tr '[:lower:]' '[:upper:]'\n",
        'test "$(/work/bin/shout quiet please)" = "QUIET PLEASE"\ntest "$(/work/bin/shout a1b)" = "A1B"\n',
    ),
    (
        "countdown",
        "prints the numbers from N down to 1, one per line",
        "3",
        '#!/bin/sh\nseq "$1" -1 1\n',
        'test "$(/work/bin/countdown 4)" = "$(printf \'4\\n3\\n2\\n1\')"\ntest -z "$(/work/bin/countdown 0)"\n',
    ),
    (
        "isprime",
        "exits with status 0 when its argument N is a prime number and 1 otherwise (printing nothing)",
        "7",
        "#!/usr/bin/env python3\nimport sys\nn = int(sys.argv[1])\nsys.exit(0 if n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1)) else 1)\n",
        "/work/bin/isprime 13\n/work/bin/isprime 2\n! /work/bin/isprime 1\n! /work/bin/isprime 21\n",
    ),
    (
        "vowels",
        "prints how many vowels (a, e, i, o, u, either case) its first argument contains",
        "banana",
        "#!/usr/bin/env python3\nimport sys\nprint(sum(c in 'aeiouAEIOU' for c in sys.argv[1]))\n",
        'test "$(/work/bin/vowels Education)" = 5\ntest "$(/work/bin/vowels rhythm)" = 0\n',
    ),
]


def rows() -> list[dict]:
    return [
        {
            "data_source": "cli_program",
            "prompt": [
                {
                    "role": "user",
                    "content": f"Write an executable program /work/bin/{name} that {what}. For example "
                    f"`/work/bin/{name} {example}`. Use the tools to write and try it, then call submit.",
                }
            ],
            "env_class": "cli_program",
            "reward_spec": {"method": "hidden_check", "ground_truth": check, "program": f"/work/bin/{name}"},
            "extra_info": {"id": f"cli_program-{name}", "solution": solution, "example": example},
            "tools": ["bash", "str_replace_editor", "submit"],
            "max_turns": 6,
            "sandbox": {"image": "harness-base:latest", "workdir": "/work", "memory": "512m"},
        }
        for name, what, example, solution, check in PROGRAMS
    ]


if __name__ == "__main__":
    import json
    from pathlib import Path

    path = Path(__file__).with_suffix(".jsonl")
    path.write_text("".join(json.dumps(row) + "\n" for row in rows()))
    print(path)
