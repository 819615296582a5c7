"""`arith`: generated arithmetic word problems in the GSM8K format (a warm-up set small models learn).

Deterministic from a seed; the splits never share a problem: `validation` (the held-out set, `arith`), `train`
and `val` (for choosing checkpoints, e.g. an SFT plateau, without looking at the held-out set). Answers
are written GSM8K-style: the working, then `#### <number>`.
"""

from __future__ import annotations

import random
import re

from .gsm8k import gsm8k_tasks
from .task import Task

NAMES = ["Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun"]
THINGS = ["apples", "books", "coins", "pens", "shells", "stamps", "cards", "marbles"]
TEMPLATES = [
    ("{n} has {a} {t}. {n} gets {b} more. How many {t} does {n} have now?", "+"),
    ("{n} has {a} {t} and gives away {b}. How many {t} are left?", "-"),
    ("{n} buys {a} bags with {b} {t} in each bag. How many {t} does {n} buy?", "*"),
]


def question_operation(question: str) -> str | None:
    """The operation (+, - or *) of a question one of TEMPLATES wrote (or of a prompt that starts with one); None for
    any other text."""
    for template, op in TEMPLATES:
        if re.match(re.sub(r"\\\{\w+\\\}", ".+?", re.escape(template)), question):
            return op
    return None


def arith_rows(count: int, seed: int, max_operand: int = 9) -> list[dict[str, str]]:
    rng = random.Random(seed)
    rows, seen = [], set()
    while len(rows) < count:
        template, op = rng.choice(TEMPLATES)
        a, b = rng.randint(1, max_operand), rng.randint(1, max_operand)
        if op == "-" and b > a:
            a, b = b, a
        question = template.format(n=rng.choice(NAMES), t=rng.choice(THINGS), a=a, b=b)
        if question in seen:
            continue
        seen.add(question)
        value = {"+": a + b, "-": a - b, "*": a * b}[op]
        rows.append({"question": question, "answer": f"{a} {op} {b} = {value}\n#### {value}"})
    return rows


def arith_splits(
    train: int = 2000, validation: int = 200, seed: int = 0, max_operand: int = 9, val: int = 200
) -> dict[str, list[dict[str, str]]]:
    """Disjoint splits drawn from one stream of distinct problems: validation first, then train, then val (drawn
    last, so adding it left the other two as they were)."""
    pool = arith_rows(validation + train + val, seed, max_operand)
    return {
        "validation": pool[:validation],
        "train": pool[validation : validation + train],
        "val": pool[validation + train :],
    }


def arith_tasks(
    split: str = "validation", variant: str = "single", seed: int = 0, max_operand: int = 9, name: str = "arith"
) -> list[Task]:
    """`arith` (one-digit operands), or `arith2` with `max_operand=99`: two-digit operands, a set a small
    pretrained model does not solve once it has learned the answer format."""
    return gsm8k_tasks(arith_splits(seed=seed, max_operand=max_operand)[split], variant, split, name=name)
