"""Turn tokens into a ``{section: {option: value}}`` mapping."""

from __future__ import annotations

from .errors import DuplicateOptionError, DuplicateSectionError, ParseError
from .lexer import Kind, tokenize, unquote

DEFAULT_SECTION = "DEFAULT"


def optionxform(name: str) -> str:
    """Normalise an option name: option names are case-insensitive."""
    return name.strip().lower()


def parse(text: str, *, strict: bool = True) -> dict[str, dict[str, str]]:
    """Parse INI ``text``.

    Section names are case-sensitive; option names are normalised with
    :func:`optionxform`. Values are raw (no interpolation). Indented lines
    continue the previous option's value; a blank line ends it. In strict
    mode duplicate sections and duplicate options are errors, otherwise
    duplicate sections are merged and the last option wins.
    """
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    current_key: str | None = None
    seen_options: set[tuple[str, str]] = set()
    section_name = ""
    for tok in tokenize(text):
        if tok.kind is Kind.BLANK:
            current_key = None
        elif tok.kind is Kind.COMMENT:
            continue
        elif tok.kind is Kind.SECTION:
            section_name = tok.name
            if section_name in sections and strict:
                raise DuplicateSectionError(
                    f"duplicate section {section_name!r}", tok.lineno, tok.raw
                )
            current = sections.setdefault(section_name, {})
            current_key = None
        elif tok.kind is Kind.OPTION:
            if current is None:
                raise ParseError("option outside of any section", tok.lineno, tok.raw)
            key = optionxform(tok.name)
            if strict and (section_name, key) in seen_options:
                raise DuplicateOptionError(f"duplicate option {key!r}", tok.lineno, tok.raw)
            seen_options.add((section_name, key))
            current[key] = unquote(tok.value)
            current_key = key
        else:  # continuation
            if current is None or current_key is None:
                raise ParseError("unexpected continuation line", tok.lineno, tok.raw)
            if current[current_key]:
                current[current_key] += "\n" + tok.value
            else:
                current[current_key] = tok.value
    return sections
