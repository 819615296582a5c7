"""The languages repo-fix tasks are written in: how a project in each is recognised, built, tested and graded.

A registry, like task kinds: a language is one module that defines a `Language` subclass and calls
`register_language`. Each names

- `markers`: files at a repository's root that make it a project of that language (`go.mod`);
- `packages`: the Debian packages of its toolchain, added to the trixie base (`base_recipe`); the base
  keeps Python 3, which the agent's file editor runs;
- `log_parser`: the swebench parser (a key of `swebench.harness.log_parsers.PARSER_REGISTRY`) that reads
  the output of its `test_command`;
- `is_test_path` / `is_test_config`: what the patch review treats as tests and as test-runner
  configuration (neutralized in the default grading mode, refused in the refuse mode), consulted for every
  patch whatever its project's language: a `*_test.go` is a test file in any repository;
  `is_test_config_edit`: the same for the changed lines of a file shared with the build (go.mod's `replace`
  lines, Cargo.toml's `[[test]]` settings), and `refusals`: what added source can never be part of a fix (a
  build script that rewrites files, code that exists only under test).

Python's own rules live in `tasks.swe` (the test command) and `tasks.grading.patch_policy` (test paths);
its entry here names them so that every language is found the same way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path


class Language(ABC):
    name = ""
    title = ""  # as the agent's prompt names it: "A {title} repository is checked out at ..."
    aliases: tuple[str, ...] = ()
    markers: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    standins: tuple[str, ...] = ()  # public images of its toolchain its base stands in for offline (`node:*`)
    log_parser = ""
    # Every swebench parser of this language's runners' output: an instance that names no language is
    # known by its parser (a SWE-bench Multilingual instance with parse_log_gotest is Go).
    log_parsers: tuple[str, ...] = ()

    def base_recipe(self) -> dict:
        """The recipe of this language's base image: the trixie base plus `packages`."""
        from sandboxes.images import BASES, TOOLCHAIN_BASE

        base = BASES[TOOLCHAIN_BASE].recipe
        if not self.packages:
            return base
        return {**base, "packages": [*base["packages"], *self.packages], "extends": base}

    def detect(self, repo: Path) -> bool:
        return any((repo / marker).exists() for marker in self.markers)

    @abstractmethod
    def test_command(self, repo: Path | None = None, tests: list[str] | None = None) -> str:
        """The shell command that runs the suite (or only the test files `tests`) from the repository root."""

    def is_test_path(self, path: str) -> bool:
        return False

    def is_test_config(self, path: str) -> bool:
        return False

    def is_test_config_edit(self, path: str, lines: list[str]) -> bool:
        """Whether an edit to `path` that adds or removes `lines` changes what the tests build or run, in a file fixes
        also change for other reasons (go.mod's `replace` lines, Cargo.toml's `[[test]]` settings): the file is put
        back whole."""
        return False

    def refusals(self, path: str, added: list[str]) -> list[str]:
        """Why a patch that adds `added` to `path` (not a test file) can never be a fix: code that runs before
        the tests and can rewrite them, or code that exists only under test. Each reason is named."""
        return []


class Python(Language):
    name = "python"
    title = "Python"
    aliases = ("py",)
    markers = ("pyproject.toml", "setup.py", "setup.cfg")
    log_parser = "parse_log_pytest"

    def base_recipe(self) -> dict:
        from sandboxes.images import BASE_RECIPE

        return BASE_RECIPE

    def test_command(self, repo: Path | None = None, tests: list[str] | None = None) -> str:
        from ..swe import TEST_COMMAND

        return " ".join([TEST_COMMAND, *tests]) if tests else TEST_COMMAND


LANGUAGES: dict[str, Language] = {}


def register_language(language: Language, replace: bool = False) -> Language:
    """Register `language` under its name and aliases; its `standins` (image patterns such as `node:*`) are then
    stood in for by its toolchain base when a Dockerfile asks for one offline (`sandboxes.standins`)."""
    from sandboxes.standins import register_toolchain

    if language.standins:
        register_toolchain(language.name, language.packages, language.standins)
    for name in (language.name, *language.aliases):
        if name in LANGUAGES and not replace and LANGUAGES[name] is not language:
            raise ValueError(f"a language named {name!r} is already registered")
        LANGUAGES[name] = language
    return language


def languages() -> list[Language]:
    """Every registered language, once each, in registration order."""
    return list(dict.fromkeys(LANGUAGES.values()))


def language_named(name: str) -> Language:
    try:
        return LANGUAGES[name.lower()]
    except KeyError:
        known = ", ".join(l.name for l in languages())
        raise ValueError(f"unknown language {name!r}: known are {known}") from None


def detect_language(repo: Path) -> Language:
    """The language of the project at `repo`, by its marker files; Python where none matches (a folder of
    plain modules has no marker). Other languages are asked first: a Node project may carry a setup.py."""
    for language in languages():
        if language.name != "python" and language.detect(repo):
            return language
    return LANGUAGES["python"]


def language_of(instance: dict) -> Language:
    """The language of a SWE-bench instance: its `language` field, else the language whose runners its log
    parser reads, else Python."""
    if instance.get("language"):
        return language_named(str(instance["language"]))
    parser = instance.get("log_parser")
    for language in languages():
        if parser and parser in (language.log_parser, *language.log_parsers):
            return language
    return LANGUAGES["python"]


def is_foreign_test_path(path: str) -> bool:
    """Whether any language other than Python calls `path` a test file or test-runner configuration."""
    return any(l.is_test_path(path) or l.is_test_config(path) for l in languages() if l.name != "python")


register_language(Python())
# The other languages register themselves on import; import them here so every registry user sees them.
_LANGUAGE_MODULES: tuple[str, ...] = ("go", "javascript", "rust")
for _module in _LANGUAGE_MODULES:
    __import__(f"{__name__}.{_module}")
