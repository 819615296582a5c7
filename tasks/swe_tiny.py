"""The built-in `swe-tiny` task sets: thousands of tiny repo-fix tasks a small model can learn.

Each instance is a small Python package (`calc/core.py` with two functions drawn from the
families below, `tests/test_core.py` with one test per function) in which one line of one
function carries a planted bug: a wrong operator, an off-by-one or swapped arguments. Every
test asserts with a message that names the line its function should compute (`scale_sum should
compute: return a * b + 3`), as a project's own tests might; the problem statement is the
failing test's output plus the file and the current text of the failing line. So the statement
names the location and the fix, and both can be copied: a tiny model can learn the task from
demonstrations, and GRPO can sharpen what it half-learned. The package path is the same for the
whole family (`/testbed/calc/core.py`); the functions, constants, inputs and bugs vary.

All instances share ONE image (the harness base image: python3, pytest, git). The instance's
repository is created at the start of every sandbox by its `setup_script` (files written into
/testbed and committed with fixed author and dates, so the commit id is known in advance and
checked by the script); the episode and the grader both run it, so thousands of instances cost
no image builds. The grader is the real one (tasks/grading/grade.py) with every check on.

Instances are generated deterministically from their split and index. `swe-tiny` (held-out)
and `swe-tiny-train` share no fix and no problem statement: a fix is the edit that resolves an
instance (its buggy line -> its correct line), and one fix in five (HELDOUT_FIXES, chosen by a
hash) is only ever planted in held-out instances, so every held-out statement names a fix that
training never shows. Within the held-out set every statement is distinct; training draws
repeat statements (with other inputs and other functions beside) but never a held-out one.
FAIL_TO_PASS / PASS_TO_PASS follow from the construction (the bugged function's test
fails and the other passes, checked by running the functions on the host while generating);
`verify_test_lists` recomputes them by running the tests in sandboxes, which the tests do on a
sample (running thousands would take hours).

The `unique-` splits (`swe-tiny-unique`, `-val`, `-sft`, `-rl`) leave nothing to recall: the bugged function's
constant is drawn from WIDE_KS (10..999) instead of 2..9, so there are thousands of fixes, each split holds the fixes a
hash gives it, and no two instances of a split share a fix. A model resolves them only by copying the lines the
statement quotes; every held-out instance measures that skill on a fix of its own.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import random
import shlex
from operator import itemgetter
from dataclasses import dataclass
from typing import Any, Callable

from .errors import TaskError
from .swe import TEST_COMMAND, WORKDIR, make_eval_script

HELDOUT_SIZE = 200
VALIDATION_SIZE = 100
TRAIN_SIZE = 4000
RL_SIZE = 1000
MODULE = "core.py"
TEST_FILE = "tests/test_core.py"
AUTHOR = ("harness", "harness@example.invalid")
COMMIT_DATE = "1700000000 +0000"
COMMIT_MESSAGE = "Initial import\n"
_HEREDOC = "EOF_SWE_TINY_4b1d"

PACKAGE = "calc"  # one package path for the whole family: a tiny model copies it from nothing


@dataclass(frozen=True)
class Family:
    """A function template: its names, its source (with {name} and {k}), inputs and bugs.

    `mutations` are (correct line, bugged line, kind) with the same placeholders; `inputs`
    draws one argument tuple for the tests.
    """

    names: tuple[str, ...]
    source: str
    mutations: tuple[tuple[str, str, str], ...]
    inputs: Callable[[random.Random, int], tuple]
    ks: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 8, 9)


def _ints(low: int, high: int, count: int) -> Callable[[random.Random, int], tuple]:
    return lambda rng, k: tuple(rng.randint(low, high) for _ in range(count))


def _list(rng: random.Random, k: int) -> tuple:
    return ([rng.randint(1, 20) for _ in range(rng.randint(2, 6))],)


def _threshold(rng: random.Random, k: int) -> tuple:
    x = rng.randint(0, 20)
    return (x, x if rng.random() < 0.5 else rng.randint(0, 20))  # equal half the time: the boundary


FAMILIES = (
    Family(
        ("scale_sum", "weighted", "combine", "blend"),
        "def {name}(a, b):\n    return a * b + {k}\n",
        (
            ("    return a * b + {k}", "    return a + b + {k}", "operator"),
            ("    return a * b + {k}", "    return a * b - {k}", "operator"),
        ),
        _ints(2, 9, 2),
    ),
    Family(
        ("total", "sum_all", "accumulate", "grand_total"),
        "def {name}(items):\n    result = {k}\n    for i in range(len(items)):\n        result += items[i]\n    return result\n",
        (
            ("    for i in range(len(items)):", "    for i in range(len(items) - 1):", "off-by-one"),
            ("    for i in range(len(items)):", "    for i in range(1, len(items)):", "off-by-one"),
        ),
        _list,
    ),
    Family(
        ("ratio", "share", "percent", "portion"),
        "def _div_{name}(num, den):\n    return num * {k} // den\n\n\ndef {name}(part, whole):\n    return _div_{name}(part, whole)\n",
        (("    return _div_{name}(part, whole)", "    return _div_{name}(whole, part)", "swapped arguments"),),
        _ints(1, 9, 2),
    ),
    Family(
        ("multiples", "steps", "ladder", "series"),
        "def {name}(n):\n    return [i * {k} for i in range(1, n + 1)]\n",
        (
            (
                "    return [i * {k} for i in range(1, n + 1)]",
                "    return [i * {k} for i in range(1, n)]",
                "off-by-one",
            ),
            (
                "    return [i * {k} for i in range(1, n + 1)]",
                "    return [i * {k} for i in range(n + 1)]",
                "off-by-one",
            ),
        ),
        _ints(1, 6, 1),
    ),
    Family(
        ("reached", "at_least", "passes", "qualifies"),
        "def {name}(score, limit):\n    return score >= limit\n",
        (
            ("    return score >= limit", "    return score > limit", "operator"),
            ("    return score >= limit", "    return score <= limit", "operator"),
        ),
        _threshold,
        ks=(0,),
    ),
    Family(
        ("spread", "span", "width", "extent"),
        "def {name}(values):\n    return max(values) - min(values) + {k}\n",
        (
            ("    return max(values) - min(values) + {k}", "    return max(values) + min(values) + {k}", "operator"),
            (
                "    return max(values) - min(values) + {k}",
                "    return min(values) - max(values) + {k}",
                "swapped arguments",
            ),
        ),
        _list,
    ),
    Family(
        ("offset", "shift", "delta", "gap"),
        "def {name}(start, end):\n    return (end - start) * {k}\n",
        (
            ("    return (end - start) * {k}", "    return (start - end) * {k}", "swapped arguments"),
            ("    return (end - start) * {k}", "    return (end - start) + {k}", "operator"),
        ),
        _ints(0, 12, 2),
    ),
    Family(
        ("prefix", "head", "leading", "first_part"),
        "def {name}(text):\n    return text[:{k}]\n",
        (
            ("    return text[:{k}]", "    return text[:{k} - 1]", "off-by-one"),
            ("    return text[:{k}]", "    return text[1:{k}]", "off-by-one"),
        ),
        lambda rng, k: ("".join(rng.choice("abcdefghij") for _ in range(rng.randint(k + 1, k + 6))),),
    ),
)
FUNCTIONS_PER_REPO = 2
CASES_PER_TEST = 3


def fix_of(instance: dict[str, Any]) -> tuple[str, str]:
    """The edit that resolves an instance: (its buggy line, its correct line), as the statement shows them."""
    (edit,) = instance["gold_edits"]
    return edit["old_str"], edit["new_str"]


def all_fixes() -> list[tuple[str, str]]:
    """Every fix the families can plant, in a fixed order."""
    fixes = {
        (bugged.format(name=name, k=k).strip(), correct.format(name=name, k=k).strip())
        for family in FAMILIES
        for correct, bugged, _ in family.mutations
        for name in family.names
        for k in family.ks
    }
    return sorted(fixes)


def _fix_rank(fix: tuple[str, str]) -> str:
    return hashlib.sha256(f"swe-tiny-fix\n{fix[0]}\n{fix[1]}".encode()).hexdigest()


_RANKED = sorted(all_fixes(), key=_fix_rank)
HELDOUT_FIXES = frozenset(_RANKED[: len(_RANKED) // 5])
# A validation split for choosing checkpoints: fixes of its own, in neither training nor the held-out set.
VALIDATION_FIXES = frozenset(_RANKED[len(_RANKED) // 5 : len(_RANKED) // 5 + len(_RANKED) // 10])
# A third of the training fixes, for prompts without demonstrations: `swe-tiny-sft` (demonstrations) and `swe-tiny-rl`
# (reward only) are the training draws split by fix, so RL practises on fixes SFT never showed, as on held-out ones.
_TRAIN_FIXES = _RANKED[len(_RANKED) // 5 + len(_RANKED) // 10 :]
RL_FIXES = frozenset(_TRAIN_FIXES[: len(_TRAIN_FIXES) // 3])

WIDE_KS = range(10, 1000)
# The families whose fixed line shows the constant: with WIDE_KS, each has about 2,000 fixes.
WIDE_FAMILIES = tuple(family for family in FAMILIES if all("{k}" in correct for correct, _, _ in family.mutations))
UNIQUE_SIZES = {"heldout": 200, "val": 100, "sft": 2000, "rl": 1000}
# The unique splits by a fix's hash, in these shares: held-out, validation, reward-only; the rest is demonstrated (sft).
_UNIQUE_SHARES = (("heldout", 0.2), ("val", 0.1), ("rl", 0.7 / 3))


def unique_split_of(fix: tuple[str, str]) -> str:
    """The one `unique-` split whose instances may carry `fix`."""
    point, edge = int(_fix_rank(fix)[:12], 16) / 16**12, 0.0
    for split, share in _UNIQUE_SHARES:
        edge += share
        if point < edge:
            return split
    return "sft"


def swe_tiny_instances(split: str, count: int | None = None) -> list[dict[str, Any]]:
    """The `heldout`, `val`, `train`, `sft` or `rl` instances, or a `unique-` one's, generated deterministically."""
    unique = split.removeprefix("unique-")
    if unique != split and unique in UNIQUE_SIZES:
        return list(_unique(unique, count or UNIQUE_SIZES[unique]))
    if split == "heldout":
        return list(_heldout(count or HELDOUT_SIZE))
    if split == "val":
        return list(_validation(count or VALIDATION_SIZE))
    if split in ("train", "sft", "rl"):
        return list(_train(count or (RL_SIZE if split == "rl" else TRAIN_SIZE), split))
    raise TaskError(
        f"unknown swe-tiny split {split!r}: use 'train', 'sft', 'rl', 'val' or 'heldout', "
        "or 'unique-' and one of these but 'train'"
    )


@functools.lru_cache(maxsize=4)
def _heldout(count: int) -> tuple[dict[str, Any], ...]:
    return tuple(_distinct("heldout", count, lambda fix: fix in HELDOUT_FIXES, key=itemgetter("problem_statement")))


@functools.lru_cache(maxsize=4)
def _validation(count: int) -> tuple[dict[str, Any], ...]:
    return tuple(_distinct("val", count, lambda fix: fix in VALIDATION_FIXES, key=itemgetter("problem_statement")))


@functools.lru_cache(maxsize=8)
def _unique(split: str, count: int) -> tuple[dict[str, Any], ...]:
    return tuple(_distinct(f"unique-{split}", count, lambda fix: unique_split_of(fix) == split, key=fix_of))


@functools.lru_cache(maxsize=8)
def _train(count: int, subset: str = "train") -> tuple[dict[str, Any], ...]:
    """The training draws: all (`train`), or those whose fix is (`rl`) or is not (`sft`) in RL_FIXES."""
    allowed = {
        "train": lambda fix: True,
        "sft": lambda fix: fix not in RL_FIXES,
        "rl": lambda fix: fix in RL_FIXES,
    }[subset]

    def training(fix: tuple[str, str]) -> bool:
        return fix not in HELDOUT_FIXES | VALIDATION_FIXES and allowed(fix)

    return tuple(_distinct("train", count, training, key=itemgetter("content_key"), name=subset))


def _distinct(
    split: str,
    count: int,
    allowed: Callable[[tuple[str, str]], bool],
    key: Callable[[dict[str, Any]], Any],
    name: str | None = None,
) -> list[dict[str, Any]]:
    """The split's first `count` draws whose fix is `allowed`, without two of the same `key`; their ids are
    `swe-tiny-NAME-INDEX` (NAME: the split's, unless given)."""
    seen, out, draw = set(), [], 0
    while len(out) < count:
        instance = make_instance(split, draw, len(out), allowed, name)
        draw += 1
        if instance is None or key(instance) in seen:
            continue
        seen.add(key(instance))
        out.append(instance)
        if draw > 100 * (count + 100):
            raise TaskError(f"swe-tiny {split}: only {len(out)} distinct instances in {draw} draws; ask for fewer")
    return out


def make_instance(
    split: str,
    draw: int,
    index: int,
    allowed: Callable[[tuple[str, str]], bool] = lambda fix: True,
    name: str | None = None,
) -> dict[str, Any] | None:
    """One instance from its split and draw number (the same inputs give the same instance); None if its fix
    (see `fix_of`) is not `allowed`. A `unique-` split bugs a WIDE_FAMILIES function with a WIDE_KS constant."""
    rng = random.Random(f"swe-tiny/{split}/{draw}")
    wide = split.startswith("unique-")
    if wide:
        first = rng.choice(WIDE_FAMILIES)
        families = [first, rng.choice([family for family in FAMILIES if family is not first])]
    else:
        families = rng.sample(FAMILIES, FUNCTIONS_PER_REPO)
    bugged = rng.randrange(FUNCTIONS_PER_REPO)
    if wide and bugged:
        families.reverse()
    while True:  # redraw until the bug shows in the tests and both lines are unique in the module
        chosen = [
            (family, rng.choice(family.names), rng.choice(WIDE_KS if wide and i == bugged else family.ks))
            for i, family in enumerate(families)
        ]
        mutation = rng.choice(families[bugged].mutations)
        correct_line, bugged_line = (part.format(name=chosen[bugged][1], k=chosen[bugged][2]) for part in mutation[:2])
        kind = mutation[2]
        sources = [family.source.format(name=name, k=k) for family, name, k in chosen]
        module = "\n\n".join(sources)
        buggy_module = module.replace(correct_line + "\n", bugged_line + "\n")
        if module.count(correct_line.strip()) != 1 or buggy_module.count(bugged_line.strip()) != 1:
            continue
        cases = [[args for args in (family.inputs(rng, k) for _ in range(CASES_PER_TEST))] for family, _, k in chosen]
        buggy_source = sources[bugged].replace(correct_line + "\n", bugged_line + "\n")
        expected = [
            [_call(src, name, args) for args in fcases] for src, (_, name, _), fcases in zip(sources, chosen, cases)
        ]
        got = [_call(buggy_source, chosen[bugged][1], args) for args in cases[bugged]]
        if got != expected[bugged]:
            break
    if not allowed((bugged_line.strip(), correct_line.strip())):
        return None
    names = [name for _, name, _ in chosen]
    # The line each test names: the family's first mutated line, which is the bugged one for the bugged function.
    intended = [
        (correct_line if i == bugged else family.mutations[0][0].format(name=name, k=k)).strip()
        for i, (family, name, k) in enumerate(chosen)
    ]
    tests = _test_file(names, cases, expected, intended)
    path = f"{PACKAGE}/{MODULE}"
    files = {f"{PACKAGE}/__init__.py": "", path: buggy_module, TEST_FILE: tests}
    base_commit = commit_id(files)
    line_number = buggy_module.splitlines().index(bugged_line) + 1
    statement = _statement(names[bugged], intended[bugged], path, line_number, bugged_line.strip())
    content_key = hashlib.sha256(repr((sorted(files.items()), correct_line)).encode()).hexdigest()[:16]
    return {
        "instance_id": f"swe-tiny-{name or split}-{index:05d}",
        "repo": f"harness-tiny/{PACKAGE}",
        "base_commit": base_commit,
        "environment_setup_commit": base_commit,
        "patch": _diff(path, buggy_module, module),
        "test_patch": "",
        "problem_statement": statement,
        "hints_text": "",
        "created_at": "",
        "version": "0.1",
        "eval_script": make_eval_script(base_commit, "", TEST_COMMAND + " " + TEST_FILE),
        "setup_script": setup_script(files, base_commit),
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
        "workdir": WORKDIR,
        "FAIL_TO_PASS": [f"{TEST_FILE}::test_{names[bugged]}"],
        "PASS_TO_PASS": sorted(f"{TEST_FILE}::test_{n}" for i, n in enumerate(names) if i != bugged),
        "gold_edits": [{"path": f"{WORKDIR}/{path}", "old_str": bugged_line.strip(), "new_str": correct_line.strip()}],
        "kind": kind,
        "content_key": content_key,
    }


def _call(source: str, name: str, args: tuple) -> Any:
    return _functions(source)[name](*args)


@functools.lru_cache(maxsize=4096)
def _functions(source: str) -> dict[str, Any]:
    scope: dict[str, Any] = {}
    exec(compile(source, "<swe-tiny>", "exec"), scope)  # our own templates, never user input
    return scope


def _test_file(names: list[str], cases: list[list[tuple]], expected: list[list[Any]], intended: list[str]) -> str:
    lines = [f"from {PACKAGE}.core import {', '.join(names)}", ""]
    for name, fcases, fexpected, line in zip(names, cases, expected, intended):
        message = f"{name} should compute: {line}"
        lines += ["", f"def test_{name}():"]
        lines += [
            f"    assert {name}({', '.join(map(repr, args))}) == {value!r}, {message!r}"
            for args, value in zip(fcases, fexpected)
        ]
    return "\n".join(lines) + "\n"


def _statement(name: str, intended: str, path: str, line_number: int, current: str) -> str:
    return (
        f"`python3 -m pytest {TEST_FILE}` fails:\n"
        f"FAILED {TEST_FILE}::test_{name} - AssertionError: {name} should compute: {intended}\n"
        f"{path} line {line_number} is: {current}"
    )


def _diff(path: str, before: str, after: str) -> str:
    hunks = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(hunks)


def setup_script(files: dict[str, str], base_commit: str) -> str:
    """Shell that writes `files` into the work directory and commits them as `base_commit`.

    Idempotent: a sandbox already at that commit (a fork of a set-up one) is left alone.
    """
    name, email = AUTHOR
    lines = [
        "set -euo pipefail",
        f"mkdir -p {WORKDIR}",
        f"cd {WORKDIR}",
        f'if [ "$(git rev-parse HEAD 2>/dev/null)" = {base_commit} ]; then exit 0; fi',
    ]
    for path, text in sorted(files.items()):
        if _HEREDOC in text:
            raise TaskError(f"{path}: the file contains the heredoc marker")
        lines.append(f"mkdir -p {shlex.quote(path.rpartition('/')[0] or '.')}")
        lines += (
            [f"cat > {shlex.quote(path)} <<'{_HEREDOC}'", text.rstrip("\n"), _HEREDOC]
            if text
            else [f": > {shlex.quote(path)}"]
        )
    env = (
        f"GIT_AUTHOR_NAME={name} GIT_AUTHOR_EMAIL={email} GIT_COMMITTER_NAME={name} GIT_COMMITTER_EMAIL={email} "
        f"GIT_AUTHOR_DATE={shlex.quote(COMMIT_DATE)} GIT_COMMITTER_DATE={shlex.quote(COMMIT_DATE)}"
    )
    lines += [
        "git init -q -b main",
        "git add -A",
        f"{env} git commit -q --no-gpg-sign -m {shlex.quote(COMMIT_MESSAGE.strip())}",
        f"test \"$(git rev-parse HEAD)\" = {base_commit} || {{ echo 'swe-tiny: unexpected base commit' >&2; exit 3; }}",
    ]
    return "\n".join(lines) + "\n"


def commit_id(files: dict[str, str]) -> str:
    """The id git gives a first commit of `files` (mode 100644) made by `setup_script`."""
    tree = _tree(files, "")
    name, email = AUTHOR
    body = (
        f"tree {tree.hex()}\nauthor {name} <{email}> {COMMIT_DATE}\ncommitter {name} <{email}> {COMMIT_DATE}\n\n"
        f"{COMMIT_MESSAGE}"
    ).encode()
    return _object("commit", body).hex()


def _tree(files: dict[str, str], prefix: str) -> bytes:
    entries = {}
    for path, text in files.items():
        if not path.startswith(prefix):
            continue
        head, _, rest = path[len(prefix) :].partition("/")
        if rest:
            entries[head] = (b"40000", _tree(files, f"{prefix}{head}/"), head + "/")
        else:
            entries[head] = (b"100644", _object("blob", text.encode()), head)
    body = b"".join(
        mode + b" " + name.encode() + b"\0" + sha
        for name, (mode, sha, _) in sorted(entries.items(), key=lambda item: item[1][2])
    )
    return _object("tree", body)


def _object(kind: str, body: bytes) -> bytes:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).digest()


def verify_test_lists(instance: dict[str, Any], backend) -> dict[str, list[str]]:
    """FAIL_TO_PASS / PASS_TO_PASS recomputed by running the tests in sandboxes without and with the gold patch."""
    from .swe_demo import compute_test_lists

    return compute_test_lists(instance, backend)


def swe_tiny_tasks(split: str, count: int | None = None) -> list:
    """The split's instances as Tasks, on the shared base image (built if missing)."""
    from sandboxes.images import build_base_image

    from .swe import instance_to_task

    image = build_base_image()
    return [
        _compact(instance_to_task({**instance, "image": image}, max_turns=8))
        for instance in swe_tiny_instances(split, count)
    ]


PROMPT = (
    "Fix the bug in the repository at {workdir} (do not edit the tests), then call `submit`.\n\n{problem_statement}"
)


def _compact(task):
    """A prompt a tiny model can afford: the statement under a one-line instruction, and the tools'
    compact schemas (harness.tools.compact_schema); the tools, sandbox and grading are unchanged.
    ~490 tokens of the tiny tool-use tokenizer instead of ~870."""
    from dataclasses import replace

    instance = task.metadata["instance"]
    prompt = PROMPT.format(workdir=instance.get("workdir", WORKDIR), problem_statement=instance["problem_statement"])
    return replace(
        task, prompt=[{"role": "user", "content": prompt}], metadata={**task.metadata, "compact_tools": True}
    )
