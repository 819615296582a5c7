"""Bugs to plant: AST-level mutations of non-test code, applied as byte-exact source splices.

A `Mutation` is one edit inside one function: the bytes `start:end` of a file replaced by
`text`. Everything else in the file stays byte-identical. Where the operator of an expression
can be swapped on its own (`a < b` -> `a <= b`) only the operator token changes; otherwise the
mutated node alone is rewritten with `ast.unparse`. `find_mutations` lists every candidate of a
project, `order` puts them in a seeded order that alternates between kinds.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

SKIPPED_DIRS = {
    "test",
    "tests",
    "testing",
    "doc",
    "docs",
    "example",
    "examples",
    "bench",
    "benchmarks",
    "scripts",
    "build",
    "dist",
    "site-packages",
    "node_modules",
}
SKIPPED_FILES = {"setup.py", "conftest.py", "noxfile.py", "fabfile.py"}

_FLIP_COMPARE = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_FLIP_ARITH = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.Pow: ast.Mult,
}
_SYMBOL = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.Pow: "**",
    ast.And: "and",
    ast.Or: "or",
}
_WRONG_EXCEPTION = {
    "ValueError": "TypeError",
    "TypeError": "ValueError",
    "KeyError": "IndexError",
    "IndexError": "KeyError",
    "AttributeError": "KeyError",
    "LookupError": "ValueError",
    "RuntimeError": "ValueError",
    "NotImplementedError": "RuntimeError",
    "OSError": "ValueError",
    "ZeroDivisionError": "ValueError",
    "OverflowError": "ValueError",
    "AssertionError": "ValueError",
}
_REMOVABLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Raise, ast.Delete, ast.If)


@dataclass(frozen=True)
class Mutation:
    """Replace bytes `start:end` of `path` (relative, POSIX) by `text`: one bug in `function`."""

    kind: str
    path: str
    function: str
    line: int
    start: int
    end: int
    text: str
    description: str

    @property
    def id(self) -> str:
        digest = hashlib.sha1(self.text.encode()).hexdigest()[:8]
        return f"{self.kind}:{self.path}:{self.line}:{self.start}-{self.end}:{digest}"

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.text.encode() + source[self.end :]


def mutable_files(root: Path) -> list[Path]:
    """The project's non-test Python files, sorted."""
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if any(p in SKIPPED_DIRS or p.startswith(".") or p.endswith(".egg-info") for p in parts[:-1]):
            continue
        name = parts[-1]
        if name in SKIPPED_FILES or name.startswith("test_") or name.endswith("_test.py"):
            continue
        found.append(path)
    return found


def find_mutations(root: Path) -> list[Mutation]:
    """Every candidate mutation in the project under `root`, in file and source order."""
    return mutations_in(root, mutable_files(root), file_mutations)


def mutations_in(root: Path, files: list[Path], mutate: Callable[[bytes, str], list[Mutation]]) -> list[Mutation]:
    """The mutations `mutate(source, relative path)` finds in each of `files`, in order."""
    return [m for path in files for m in mutate(path.read_bytes(), path.relative_to(root).as_posix())]


def file_mutations(source: bytes, path: str) -> list[Mutation]:
    """Every candidate mutation in one file (none if it is not UTF-8 Python that parses)."""
    try:
        source.decode("utf-8")
        tree = ast.parse(source)
    except (UnicodeDecodeError, SyntaxError, ValueError):
        return []
    text = _Source(source)
    seen: set[tuple[int, int, str]] = set()
    found = []
    for function, qualname in _functions(tree):
        for kind, make in KINDS.items():
            for start, end, new, description, line in make(function, text):
                key = _minimal(source, start, end, new)
                if key not in seen:
                    seen.add(key)
                    found.append(Mutation(kind, path, qualname, line, start, end, new, description))
    return found


def _minimal(source: bytes, start: int, end: int, new: str) -> tuple[int, int, bytes]:
    """The same edit without the bytes it leaves unchanged at either end (to find duplicates)."""
    old, replacement = source[start:end], new.encode()
    while old and replacement and old[0] == replacement[0]:
        old, replacement, start = old[1:], replacement[1:], start + 1
    while old and replacement and old[-1] == replacement[-1]:
        old, replacement, end = old[:-1], replacement[:-1], end - 1
    return start, end, replacement


def order(mutations: list[Mutation], seed: int) -> list[Mutation]:
    """A seeded order that takes one candidate of each kind in turn (each kind shuffled)."""
    rng = random.Random(seed)
    by_kind: dict[str, list[Mutation]] = {}
    for mutation in mutations:
        by_kind.setdefault(mutation.kind, []).append(mutation)
    queues = []
    for kind in sorted(by_kind):
        items = list(by_kind[kind])
        rng.shuffle(items)
        queues.append(items)
    ordered = []
    while queues:
        rng.shuffle(queues)
        ordered += [queue.pop() for queue in queues]
        queues = [queue for queue in queues if queue]
    return ordered


def compiles(source: bytes, path: str) -> bool:
    try:
        compile(source, path, "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError):
        return False


def unified_patch(path: str, old: bytes, new: bytes) -> str:
    """A git-style diff of one file that `git apply` and `patch -p1` accept."""
    lines = difflib.unified_diff(
        old.decode().splitlines(keepends=True), new.decode().splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    body = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    return f"diff --git a/{path} b/{path}\n{body}"


# ----------------------------------------------------------------------------- walking


class _Source:
    """The file's bytes and where each line starts, to turn AST positions into offsets."""

    def __init__(self, data: bytes):
        self.data = data
        self.line_starts = [0]
        for line in data.splitlines(keepends=True):
            self.line_starts.append(self.line_starts[-1] + len(line))

    def start(self, node: ast.AST) -> int:
        return self.line_starts[node.lineno - 1] + node.col_offset

    def end(self, node: ast.AST) -> int:
        return self.line_starts[node.end_lineno - 1] + node.end_col_offset

    def segment(self, start: int, end: int) -> str:
        return self.data[start:end].decode()


def _functions(node: ast.AST, prefix: str = "") -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """Every function and method under `node` in source order, with its dotted qualified name."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{child.name}"
            if not isinstance(child, ast.ClassDef):
                yield child, name
            yield from _functions(child, name + ".")
        else:
            yield from _functions(child, prefix)


def _body_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """Nodes of a function body, without nested functions/classes, f-strings or annotations."""
    stack = list(reversed(function.body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.JoinedStr)):
            continue
        yield node
        children = [value for name, value in ast.iter_fields(node) if name not in ("annotation", "returns")]
        for value in reversed(children):
            if isinstance(value, ast.AST):
                stack.append(value)
            elif isinstance(value, list):
                stack.extend(item for item in reversed(value) if isinstance(item, ast.AST))


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


Edit = tuple[int, int, str, str, int]  # start, end, replacement, description, line


def _replace(node: ast.AST, new: ast.AST, src: _Source, description: str) -> Edit:
    return src.start(node), src.end(node), ast.unparse(new), description, node.lineno


def _swap_operator(
    node: ast.AST, left: ast.AST, right: ast.AST, old: type, new: type, rebuilt: ast.AST, src: _Source
) -> Edit:
    """Replace only the operator token between `left` and `right` where the text between them
    is plain (spaces, parentheses); otherwise rewrite the whole node as `rebuilt`."""
    description = f"`{_SYMBOL[old]}` -> `{_SYMBOL[new]}`"
    gap_start, gap_end = src.end(left), src.start(right)
    gap = src.segment(gap_start, gap_end)
    core = gap.strip(" \t\r\n\\()")
    if " ".join(core.split()) == _SYMBOL[old] and gap.count(core) == 1 and "#" not in gap:
        at = gap_start + len(gap[: gap.index(core)].encode())
        return at, at + len(core.encode()), _SYMBOL[new], description, node.lineno
    return _replace(node, rebuilt, src, description)


# ----------------------------------------------------------------------------- the kinds


def flip_comparison(function, src) -> Iterator[Edit]:
    """`<` <-> `<=`, `>` <-> `>=`, `==` <-> `!=`, `is` <-> `is not`, `in` <-> `not in`."""
    for node in _body_nodes(function):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                new = _FLIP_COMPARE[type(op)]
                rebuilt = ast.Compare(
                    node.left, [new() if j == i else o for j, o in enumerate(node.ops)], node.comparators
                )
                yield _swap_operator(node, operands[i], operands[i + 1], type(op), new, rebuilt, src)


def flip_boolean(function, src) -> Iterator[Edit]:
    """`and` <-> `or`."""
    for node in _body_nodes(function):
        if isinstance(node, ast.BoolOp):
            old, new = type(node.op), ast.Or if isinstance(node.op, ast.And) else ast.And
            rebuilt = ast.BoolOp(new(), node.values)
            if len(node.values) == 2:
                yield _swap_operator(node, node.values[0], node.values[1], old, new, rebuilt, src)
            else:
                yield _replace(node, rebuilt, src, f"`{_SYMBOL[old]}` -> `{_SYMBOL[new]}`")


def flip_arithmetic(function, src) -> Iterator[Edit]:
    """`+` <-> `-`, `*` <-> `/`, `//` -> `*`, `%` -> `//`, `&` <-> `|`, `<<` <-> `>>`, `**` -> `*`."""
    for node in _body_nodes(function):
        if isinstance(node, ast.BinOp) and type(node.op) in _FLIP_ARITH:
            new = _FLIP_ARITH[type(node.op)]
            rebuilt = ast.BinOp(node.left, new(), node.right)
            yield _swap_operator(node, node.left, node.right, type(node.op), new, rebuilt, src)


def flip_augmented_assignment(function, src) -> Iterator[Edit]:
    """`+=` <-> `-=`, `*=` <-> `/=`, ... (the same pairs as arithmetic)."""
    for node in _body_nodes(function):
        if isinstance(node, ast.AugAssign) and type(node.op) in _FLIP_ARITH:
            old, new = type(node.op), _FLIP_ARITH[type(node.op)]
            gap_start, gap_end = src.end(node.target), src.start(node.value)
            gap = src.segment(gap_start, gap_end)
            token = _SYMBOL[old] + "="
            description = f"`{token}` -> `{_SYMBOL[new]}=`"
            if gap.strip() == token:
                at = gap_start + len(gap[: gap.index(token)].encode())
                yield at, at + len(token.encode()), _SYMBOL[new] + "=", description, node.lineno
            else:
                yield _replace(node, ast.AugAssign(node.target, new(), node.value), src, description)


def _plus(expr: ast.expr, delta: int) -> ast.expr:
    """`expr + delta` (folded when `expr` is an integer literal)."""
    value = _int_value(expr)
    if value is not None:
        return (
            ast.Constant(value + delta) if value + delta >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-value - delta))
        )
    return ast.BinOp(expr, ast.Add() if delta > 0 else ast.Sub(), ast.Constant(abs(delta)))


def _int_value(expr: ast.expr) -> int | None:
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return expr.value
    if (
        isinstance(expr, ast.UnaryOp)
        and isinstance(expr.op, ast.USub)
        and isinstance(expr.operand, ast.Constant)
        and type(expr.operand.value) is int
    ):
        return -expr.operand.value
    return None


def off_by_one(function, src) -> Iterator[Edit]:
    """`range(a, b)` -> `range(a + 1, b)` / `range(a, b - 1)`, slice bounds and constant indices +-1."""
    for node in _body_nodes(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "range"
            and 1 <= len(node.args) <= 3
            and not node.keywords
        ):
            bounds = [(node.args[0], -1)] if len(node.args) == 1 else [(node.args[0], 1), (node.args[1], -1)]
            for arg, delta in bounds:
                new = _plus(arg, delta)
                yield _replace(arg, new, src, f"range bound `{ast.unparse(arg)}` -> `{ast.unparse(new)}`")
        elif isinstance(node, ast.Slice):
            for bound, delta in ((node.lower, 1), (node.upper, -1)):
                if bound is not None:
                    new = _plus(bound, delta)
                    yield _replace(bound, new, src, f"slice bound `{ast.unparse(bound)}` -> `{ast.unparse(new)}`")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            value = _int_value(node.slice)
            if value is not None:
                new = _plus(node.slice, 1 if value >= 0 else -1)
                yield _replace(node.slice, new, src, f"index `{value}` -> `{ast.unparse(new)}`")


def remove_statement(function, src) -> Iterator[Edit]:
    """A statement (call, assignment, return, raise, del, if-block) replaced by `pass`."""
    for node in _body_nodes(function):
        if (
            isinstance(node, _REMOVABLE)
            and not _is_docstring(node)
            and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        ):
            if isinstance(node, ast.AnnAssign) and node.value is None:
                continue
            first = ast.unparse(node).splitlines()[0]
            yield src.start(node), src.end(node), "pass", f"removed `{first}`", node.lineno


def remove_else(function, src) -> Iterator[Edit]:
    """The `else:`/`elif` branch of an `if` removed (from the end of the `if` body)."""
    for node in _body_nodes(function):
        if isinstance(node, ast.If) and node.orelse:
            elif_ = isinstance(node.orelse[0], ast.If) and "else" not in src.segment(
                src.end(node.body[-1]), src.start(node.orelse[0])
            )
            what = "elif branch" if elif_ else "else branch"
            yield src.end(node.body[-1]), src.end(node.orelse[-1]), "", f"removed the {what}", node.orelse[0].lineno


def swap_arguments(function, src) -> Iterator[Edit]:
    """Two adjacent positional arguments of a call swapped."""
    for node in _body_nodes(function):
        if isinstance(node, ast.Call):
            for first, second in itertools.pairwise(node.args):
                if isinstance(first, ast.Starred) or isinstance(second, ast.Starred):
                    continue
                a, b = src.segment(src.start(first), src.end(first)), src.segment(src.start(second), src.end(second))
                if a == b:
                    continue
                between = src.segment(src.end(first), src.start(second))
                yield (
                    src.start(first),
                    src.end(second),
                    b + between + a,
                    f"swapped arguments `{a}` and `{b}`",
                    node.lineno,
                )


def change_constant(function, src) -> Iterator[Edit]:
    """A number changed by one (or doubled, for floats), `True` <-> `False`."""
    for node in _body_nodes(function):
        if isinstance(node, ast.Constant) and not isinstance(node.value, str):
            value = node.value
            if isinstance(value, bool):
                new = not value
            elif isinstance(value, int):
                new = value + 1
            elif isinstance(value, float):
                new = value * 2 if value else 1.0
            else:
                continue
            yield _replace(node, ast.Constant(new), src, f"constant `{value!r}` -> `{new!r}`")


def negate_condition(function, src) -> Iterator[Edit]:
    """The condition of an `if`, `while` or conditional expression negated (`not`)."""
    for node in _body_nodes(function):
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            test = node.test
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                new = test.operand
            else:
                new = ast.UnaryOp(ast.Not(), test)
            edit = _replace(test, new, src, f"condition `{ast.unparse(test)}` -> `{ast.unparse(new)}`")
            yield edit[:4] + (node.lineno,)


def wrong_exception(function, src) -> Iterator[Edit]:
    """`raise ValueError(...)` -> `raise TypeError(...)`; a project's own exception -> `Exception`."""
    for node in _body_nodes(function):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name):
                name = target.id
            elif isinstance(target, ast.Attribute):
                name = ast.unparse(target)
            else:
                continue
            own = name.rsplit(".", 1)[-1]
            new = _WRONG_EXCEPTION.get(name) or (
                "Exception" if own[:1].isupper() and own.endswith(("Error", "Exception")) else None
            )
            if new:
                yield src.start(target), src.end(target), new, f"raises `{new}` instead of `{name}`", node.lineno


def early_return(function, src) -> Iterator[Edit]:
    """`return None` inserted as the function's first statement (after its docstring)."""
    body = function.body[1:] if _is_docstring(function.body[0]) else function.body
    if not body or all(
        isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) for s in body
    ):
        return
    first = body[0]
    at = src.start(first)
    line_start = src.line_starts[first.lineno - 1]
    indent = src.data[line_start:at]
    separator = "\n" + indent.decode() if not indent.strip() else "; "
    yield at, at, "return None" + separator, "returns None at the start", first.lineno


KINDS: dict[str, Callable[[ast.AST, _Source], Iterator[Edit]]] = {
    "flip_comparison": flip_comparison,
    "flip_boolean": flip_boolean,
    "flip_arithmetic": flip_arithmetic,
    "flip_augmented_assignment": flip_augmented_assignment,
    "off_by_one": off_by_one,
    "remove_statement": remove_statement,
    "remove_else": remove_else,
    "swap_arguments": swap_arguments,
    "change_constant": change_constant,
    "negate_condition": negate_condition,
    "wrong_exception": wrong_exception,
    "early_return": early_return,
}
