"""Bugs to plant in JavaScript and TypeScript: mutations found on tree-sitter's syntax tree, applied as
byte-exact splices at its nodes' byte offsets (the same `Mutation` as Python's).

The parser is tree-sitter with the `tree-sitter-javascript` and `tree-sitter-typescript` grammars, wheels
from PyPI: it runs in the harness's own Python (no Node on the host), parses TypeScript and TSX as well
as JavaScript and JSX, gives exact byte offsets for every token (the operator of `a < b` is a node of its
own), and a mutated file is checked by parsing it again (`compiles`: no error node).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from ..languages import LANGUAGES
from .mutations import SKIPPED_DIRS, Mutation, _minimal, mutations_in

EXTENSIONS = {".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
              ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx"}  # fmt: skip
# Bundles, type declarations and tool configuration are not the code under test.
_NOT_SOURCE = re.compile(r"(\.min\.[cm]?js|\.d\.[cm]?ts|\.bundle\.js)$|^(\w+\.config|gruntfile|gulpfile|karma\.conf)\.")
_FUNCTIONS = {
    "function_declaration",
    "function_expression",
    "function",
    "generator_function_declaration",
    "generator_function",
    "arrow_function",
    "method_definition",
}
_COMPARISON = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "===": "!==", "!==": "===", "==": "!=", "!=": "=="}
_BOOLEAN = {"&&": "||", "||": "&&"}
_ARITHMETIC = {"+": "-", "-": "+", "*": "/", "/": "*", "%": "*", "<<": ">>", ">>": "<<", "&": "|", "|": "&"}
_INTEGER = re.compile(r"^\d+$")


@cache
def _parser(grammar: str):
    from tree_sitter import Language, Parser

    if grammar == "javascript":
        import tree_sitter_javascript as module

        return Parser(Language(module.language()))
    import tree_sitter_typescript as module

    return Parser(Language(module.language_tsx() if grammar == "tsx" else module.language_typescript()))


def parse(source: bytes, path: str):
    return _parser(EXTENSIONS[Path(path).suffix]).parse(source)


def compiles(source: bytes, path: str) -> bool:
    """Whether the file still parses without an error node."""
    return not parse(source, path).root_node.has_error


def mutable_files(root: Path) -> list[Path]:
    """The project's JavaScript/TypeScript files outside tests, dependencies and build output, sorted."""
    language = LANGUAGES["javascript"]
    found = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.suffix not in EXTENSIONS or not path.is_file() or _NOT_SOURCE.search(path.name.lower()):
            continue
        if any(
            p in SKIPPED_DIRS or p in ("coverage", "lib-cov", "fixtures") or p.startswith(".")
            for p in relative.parts[:-1]
        ):
            continue
        if language.is_test_path(relative.as_posix()) or language.is_test_config(relative.as_posix()):
            continue
        found.append(path)
    return found


def find_mutations(root: Path) -> list[Mutation]:
    """Every candidate mutation in the project under `root`, in file and source order."""
    return mutations_in(root, mutable_files(root), file_mutations)


def file_mutations(source: bytes, path: str) -> list[Mutation]:
    """Every candidate mutation in one file (none where it is not UTF-8 or does not parse cleanly)."""
    try:
        source.decode("utf-8")
    except UnicodeDecodeError:
        return []
    tree = parse(source, path)
    if tree.root_node.has_error:
        return []
    seen: set[tuple[int, int, bytes]] = set()
    found = []
    for function, name in _functions(tree.root_node):
        for node in _body_nodes(function):
            for kind, start, end, new, description in _edits(node, source):
                key = _minimal(source, start, end, new)
                if key not in seen:
                    seen.add(key)
                    line = node.start_point[0] + 1
                    found.append(Mutation(kind, path, name, line, start, end, new, description))
    return found


def _text(node) -> str:
    return node.text.decode()


def _name(node) -> str:
    """A function's name: its own, else the variable, property or class member it is assigned to."""
    own = node.child_by_field_name("name")
    if own is not None:
        return _text(own)
    parent = node.parent
    if parent is not None and parent.type in (
        "variable_declarator",
        "pair",
        "public_field_definition",
        "field_definition",
    ):
        key = (
            parent.child_by_field_name("name")
            or parent.child_by_field_name("key")
            or parent.child_by_field_name("property")
        )
        if key is not None:
            return _text(key)
    if parent is not None and parent.type == "assignment_expression":
        return _text(parent.child_by_field_name("left"))
    return "<anonymous>"


def _functions(node, prefix: str = "") -> Iterator[tuple[object, str]]:
    """Every function, method and arrow function under `node` in source order, with a dotted name."""
    for child in node.named_children:
        if child.type in _FUNCTIONS:
            name = f"{prefix}{_name(child)}"
            yield child, name
            yield from _functions(child, name + ".")
        elif child.type in ("class_declaration", "class", "abstract_class_declaration"):
            own = child.child_by_field_name("name")
            yield from _functions(child, f"{prefix}{_text(own) if own is not None else '<class>'}.")
        else:
            yield from _functions(child, prefix)


def _body_nodes(function) -> Iterator[object]:
    """The nodes of a function's body, without nested functions or classes and without type annotations."""
    body = function.child_by_field_name("body")
    stack = [body] if body is not None else []
    while stack:
        node = stack.pop()
        if node.type in _FUNCTIONS or node.type.startswith("class") or "type" in node.type:
            continue
        yield node
        stack.extend(reversed(node.named_children))


Edit = tuple[str, int, int, str, str]  # kind, start, end, replacement, description


def _edits(node, source: bytes) -> Iterator[Edit]:
    if node.type == "binary_expression":
        operator = node.child_by_field_name("operator")
        symbol = _text(operator)
        for kind, table in (
            ("flip_comparison", _COMPARISON),
            ("flip_boolean", _BOOLEAN),
            ("flip_arithmetic", _ARITHMETIC),
        ):
            if symbol in table and not (symbol == "+" and _is_string(node)):
                yield kind, operator.start_byte, operator.end_byte, table[symbol], f"`{symbol}` -> `{table[symbol]}`"
        if symbol in _COMPARISON or symbol in ("+", "-"):
            for side in (node.child_by_field_name("left"), node.child_by_field_name("right")):
                if side.type == "number" and _INTEGER.match(_text(side)):
                    value = int(_text(side))
                    for new in (value + 1, value - 1):
                        if new >= 0:
                            yield "off_by_one", side.start_byte, side.end_byte, str(new), f"`{value}` -> `{new}`"
    elif node.type == "subscript_expression":
        index = node.child_by_field_name("index")
        if index is not None and index.type == "number" and _INTEGER.match(_text(index)):
            value = int(_text(index))
            yield "off_by_one", index.start_byte, index.end_byte, str(value + 1), f"index `{value}` -> `{value + 1}`"
    elif node.type == "unary_expression" and _text(node.child_by_field_name("operator")) == "!":
        argument = node.child_by_field_name("argument")
        yield (
            "remove_negation",
            node.start_byte,
            node.end_byte,
            _text(argument),
            f"`!{_text(argument)[:40]}` -> without `!`",
        )
    elif node.type in ("if_statement", "while_statement"):
        condition = node.child_by_field_name("condition")
        if condition is not None and condition.type == "parenthesized_expression":
            inner = source[condition.start_byte + 1 : condition.end_byte - 1].decode()
            yield (
                "negate_condition",
                condition.start_byte,
                condition.end_byte,
                f"(!({inner}))",
                f"condition `{inner.strip()[:40]}` negated",
            )
    elif node.type == "ternary_expression":
        consequence, alternative = node.child_by_field_name("consequence"), node.child_by_field_name("alternative")
        a, b = _text(consequence), _text(alternative)
        if a != b:
            new = source[consequence.start_byte : alternative.end_byte].decode()
            new = b + new[len(a) : len(new) - len(b)] + a
            yield "swap_ternary", consequence.start_byte, alternative.end_byte, new, "the two branches of `?:` swapped"
    elif node.type in ("true", "false") and node.parent is not None and node.parent.type == "return_statement":
        new = "false" if node.type == "true" else "true"
        yield "swap_return", node.start_byte, node.end_byte, new, f"`return {node.type}` -> `return {new}`"


def _is_string(node) -> bool:
    """`+` with a string literal on either side concatenates: `-` there is no bug, it is NaN everywhere."""
    return any(
        side is not None and side.type in ("string", "template_string")
        for side in (node.child_by_field_name("left"), node.child_by_field_name("right"))
    )
