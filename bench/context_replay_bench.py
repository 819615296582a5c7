"""Context strategies on real long episodes: a real agent's SWE-bench Verified trajectories, replayed.

    python -m bench.context_replay_bench [--family qwen3] [--limits 16384,32768] [--strategies keep-all,window:8,...]

The 38 mini-swe-agent trajectories of `../shared/real-agent-runs/trajectories/` (Gemini 3 Pro on real repositories:
astropy, django, sympy, ...) hold every reply and every command output as it was. Each is replayed turn by turn:
before each reply, the prompt a strategy would give for the history so far is counted with a real tokenizer and chat
template (`--family`, a tokenizer folder of scripts/fetch_tokenizers.sh; see `Counter`). An episode *ends at the limit* when
one of its prompts passes it: what a run with that context would have met. Per strategy and limit: the share of
episodes that would end there, the median turn they would end at, and the prompt tokens the whole episode costs
(the sum over its turns, the cost of serving it) against the first strategy named (keep-all). Observations (mini-swe-agent's user messages
after the first reply) are tool results here, as in our own loop.

What this does not measure: how a model behaves on the rewritten history (it replays the real agent's replies), and
`summarize`, whose summaries a model must write.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
from pathlib import Path

from rich.console import Console
from rich.table import Table

from harness.context import Context


def trajectories(shared: Path) -> list[tuple[str, list[dict]]]:
    episodes = []
    for path in sorted((shared / "real-agent-runs" / "trajectories").glob("*.traj.json.gz")):
        record = json.load(gzip.open(path))
        messages, replied = [], False
        for message in record["messages"]:
            role = message["role"]
            replied = replied or role == "assistant"
            if role == "user" and replied:  # a command's output
                role = "tool"
            messages.append({"role": role, "content": message["content"]})
        episodes.append((record["instance_id"], messages))
    return episodes


def prompt_sizes(messages: list[dict], spec: str, count) -> list[int]:
    """The tokens of the prompt before each reply, under strategy `spec`."""
    context = Context(spec, count.text)
    return [count.prompt(context.view(messages[:i])) for i, m in enumerate(messages) if m["role"] == "assistant"]


class Counter:
    """Tokens of a rendered prompt: each message's text as the tokenizer counts it (once per distinct text), plus what
    the chat template adds around a message and for the generation prompt, measured on the template itself. Rendering
    every prompt whole would cost the square of an episode's length; on these episodes this counts 0.5 to 2% above a
    whole rendering (Qwen3 and Llama 3.1 templates, 18 prompts each)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.known = tokenizer, {}

        def rendered(messages):
            return len(
                self.tokenizer.encode(
                    self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
                    add_special_tokens=False,
                )
            )

        one = [{"role": "user", "content": "x"}]
        self.generation = rendered(one) - self.text("x")
        self.per_message = (
            rendered([*one, {"role": "assistant", "content": "x"}, *one]) - rendered(one) - 2 * self.text("x")
        )

    def text(self, text: str) -> int:
        if text not in self.known:
            self.known[text] = len(self.tokenizer.encode(text, add_special_tokens=False))
        return self.known[text]

    def prompt(self, messages: list[dict]) -> int:
        return self.generation + sum(self.text(m["content"]) + self.per_message for m in messages)


def main(argv: list[str] | None = None) -> dict:
    from transformers import AutoTokenizer

    from sandboxes.images import cache_dir

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="qwen3")
    parser.add_argument("--limits", default="16384,32768")
    parser.add_argument(
        "--strategies", default="keep-all,mask-observations:8000,mask-observations:2000,window:16,window:8,window:4"
    )
    args = parser.parse_args(argv)
    shared = Path(os.environ.get("HARNESS_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    tokenizer = AutoTokenizer.from_pretrained(cache_dir() / "tokenizers" / args.family)
    episodes = trajectories(shared)
    strategies = args.strategies.split(",")
    count = Counter(tokenizer)
    sizes = {spec: [prompt_sizes(messages, spec, count) for _, messages in episodes] for spec in strategies}
    limits = [int(x) for x in args.limits.split(",")]
    console = Console(width=160)
    console.print(
        f"{len(episodes)} real episodes, {statistics.median(len(s) for s in sizes['keep-all'])} replies median; "
        f"prompts counted with the {args.family} tokenizer and chat template"
    )
    table = Table(
        "strategy", *[f"end at {n} (share, median turn)" for n in limits], f"prompt tokens (vs {strategies[0]})"
    )
    whole = sum(sum(s) for s in sizes[strategies[0]])
    result = {"episodes": len(episodes), "strategies": {}}
    for spec in strategies:
        cells, ended = [], {}
        for limit in limits:
            ends = [next(i + 1 for i, n in enumerate(s) if n > limit) for s in sizes[spec] if max(s) > limit]
            ended[limit] = len(ends)
            turn = f"{statistics.median(ends):.0f}" if ends else "-"
            cells.append(f"{len(ends)}/{len(episodes)} ({len(ends) / len(episodes):.0%}), turn {turn}")
        cost = sum(sum(s) for s in sizes[spec])
        table.add_row(spec, *cells, f"{cost:,} ({cost / whole:.2f}x)")
        result["strategies"][spec] = {"ended_at": ended, "prompt_tokens": cost}
    console.print(table)
    return result


if __name__ == "__main__":
    main()
