"""Split INI text into classified lines (tokens)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .errors import ParseError

COMMENT_PREFIXES = ("#", ";")
INLINE_COMMENT_PREFIXES = ("#", ";")
DELIMITERS = ("=", ":")


class Kind(enum.Enum):
    BLANK = "blank"
    COMMENT = "comment"
    SECTION = "section"
    OPTION = "option"
    CONTINUATION = "continuation"


@dataclass(frozen=True)
class Token:
    kind: Kind
    lineno: int
    raw: str
    name: str = ""
    value: str = ""


def strip_inline_comment(text: str) -> str:
    """Remove a trailing ``; comment`` or ``# comment``.

    A comment prefix only starts a comment when it is preceded by whitespace,
    so ``url = http://host/#anchor`` keeps its fragment.
    """
    for i, ch in enumerate(text):
        if ch in INLINE_COMMENT_PREFIXES and i > 0 and text[i - 1].isspace():
            return text[:i].rstrip()
    return text


def unquote(value: str) -> str:
    """Remove one pair of matching surrounding quotes, if present."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _split_option(stripped: str) -> tuple[str, str] | None:
    positions = [stripped.find(d) for d in DELIMITERS if d in stripped]
    if not positions:
        return None
    idx = min(positions)
    return stripped[:idx].strip(), stripped[idx + 1 :].strip()


def tokenize(text: str) -> list[Token]:
    """Classify every line of ``text``. Raises :class:`ParseError`."""
    if text.startswith("\ufeff"):
        text = text[1:]
    tokens: list[Token] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped:
            tokens.append(Token(Kind.BLANK, lineno, raw))
        elif stripped.startswith(COMMENT_PREFIXES):
            tokens.append(Token(Kind.COMMENT, lineno, raw))
        elif raw[0].isspace():
            tokens.append(
                Token(Kind.CONTINUATION, lineno, raw, value=strip_inline_comment(stripped))
            )
        elif stripped.startswith("["):
            close = stripped.find("]")
            rest = stripped[close + 1 :].strip() if close != -1 else ""
            if close == -1 or (rest and not rest.startswith(COMMENT_PREFIXES)):
                raise ParseError("malformed section header", lineno, raw)
            name = stripped[1:close].strip()
            if not name:
                raise ParseError("empty section name", lineno, raw)
            tokens.append(Token(Kind.SECTION, lineno, raw, name=name))
        else:
            parts = _split_option(stripped)
            if parts is None:
                raise ParseError("expected 'key = value'", lineno, raw)
            key, value = parts
            if not key:
                raise ParseError("empty option name", lineno, raw)
            tokens.append(
                Token(Kind.OPTION, lineno, raw, name=key, value=strip_inline_comment(value))
            )
    return tokens
