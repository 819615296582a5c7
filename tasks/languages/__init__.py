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
  build script that rewrites files, code that exists only under test);
- `sources`: the suffixes of its source files (what a mined fix changes), and `environment`: the image a
  project's commit is mined in (the base plus `environment_packages`, the tree, `install_script` run in it).

Python's own rules live in `tasks.swe` (the test command) and `tasks.grading.patch_policy` (test paths);
its entry here names them so that every language is found the same way.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path


class Unbuildable(ValueError):
    """A project that cannot be built or tested here, with the reason."""


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
    sources: tuple[str, ...] = ()  # suffixes of its source files
    # Whether a project's dependencies are resolved as of a date (mining tries the fix's date, then the newest)
    # rather than pinned by the project itself (a lock file, go.mod, Cargo.toml against Debian's packages).
    dated_dependencies = False

    def base_recipe(self) -> dict:
        """The recipe of this language's base image: the trixie base plus `packages`."""
        from sandboxes.images import BASES, TOOLCHAIN_BASE

        base = BASES[TOOLCHAIN_BASE].recipe
        if not self.packages:
            return base
        return {**base, "packages": [*base["packages"], *self.packages], "extends": base}

    def detect(self, repo: Path) -> bool:
        return self.marks({p.name for p in repo.iterdir()} if repo.is_dir() else set())

    def marks(self, root: set[str]) -> bool:
        """Whether the names at a repository's root make it a project of this language."""
        return bool(root & set(self.markers))

    def is_source_path(self, path: str) -> bool:
        return path.endswith(self.sources)

    def runs_test_file(self, path: str) -> bool:
        """Whether a test file (`is_test_path`) is one the runner is given to run, not a helper it loads."""
        return True

    def log_parser_for(self, repo: Path) -> str:
        """The parser of `test_command`'s output for the project at `repo`."""
        return self.log_parser

    def environment_packages(self, repo: Path) -> list[str]:
        """Debian packages the project at `repo` needs beyond the base (its dependencies, where Debian packages them)."""
        return []

    def install_script(self, repo: Path) -> str:
        """The project's install step, run in its root in the image ("" when it has none)."""
        return ""

    def build_image(self, repo: Path, tag: str, workdir: str = "/testbed") -> str:
        """An image of the project at `repo`: the base plus `environment_packages`, the tree in `workdir`, the
        install script run there. A build that fails raises Unbuildable with the reason. Returns `tag`."""
        from sandboxes import SandboxError
        from sandboxes.images import build_base_image, build_image

        packages = self.environment_packages(repo)
        recipe = self.base_recipe()
        if packages:
            recipe = {**recipe, "packages": [*recipe["packages"], *packages]}
        try:
            base = build_base_image(recipe)
        except SandboxError as err:
            raise Unbuildable(
                f"{apt_errors(str(err))} (the base with {', '.join(packages) or 'no package'} added)"
            ) from None
        steps = [f"FROM {base}", f"COPY repo {workdir}", f"WORKDIR {workdir}"]
        if script := self.install_script(repo):
            steps.append("COPY install.sh /tmp/harness-install.sh\nRUN bash /tmp/harness-install.sh")
        with tempfile.TemporaryDirectory(prefix="harness-install-") as scratch:
            (Path(scratch) / "install.sh").write_text(script)
            try:
                build_image(
                    tag,
                    "\n".join(steps) + "\n",
                    {"repo": repo, "install.sh": Path(scratch) / "install.sh"},
                    {"harness.language": self.name},
                )
            except SandboxError as err:
                raise Unbuildable(f"the install step failed: {err}") from None
        return tag

    def environment(
        self, repo: Path, name: str, commit: str, on_step, before: str | None = None, python: str | None = None
    ) -> tuple[str, dict]:
        """(image, notes): the environment a commit `commit` of the project `name`, checked out at `repo`, is
        mined in; built once per commit and recipe. `before` and `python` matter only where dependencies
        are dated (`dated_dependencies`)."""
        from sandboxes.images import image_exists, recipe_hash

        packages = self.environment_packages(repo)
        key = "\0".join([recipe_hash(self.base_recipe()), name, commit, *packages, self.install_script(repo)])
        slug = re.sub(r"[^a-z0-9_.-]+", "-", name.lower()).strip("-.")
        tag = f"harness-env/{self.name}-{slug}:{hashlib.sha256(key.encode()).hexdigest()[:12]}"
        if not image_exists(tag):
            on_step(f"{name}: building the {self.title} environment {tag}")
            self.build_image(repo, tag)
        return tag, {"language": self.name, "debian_packages": packages}

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
    sources = (".py",)
    dated_dependencies = True

    def runs_test_file(self, path: str) -> bool:
        return Path(path).name != "conftest.py"

    def environment(
        self, repo: Path, name: str, commit: str, on_step, before: str | None = None, python: str | None = None
    ) -> tuple[str, dict]:
        """The project image of `tasks.synth`: a host-side wheelhouse of the dependencies released before
        `before` (None: the newest), installed offline on the base of `python` (None: chosen from the project)."""
        from ..synth.project_image import build_project_image
        from ..synth.source import Project, normalise
        from ..swe import TEST_COMMAND

        built = build_project_image(
            Project(normalise(name.split("/")[-1]), repo, name, commit), TEST_COMMAND, on_step, before, python
        )
        return built.image, built.environment

    def base_recipe(self) -> dict:
        from sandboxes.images import BASE_RECIPE

        return BASE_RECIPE

    def test_command(self, repo: Path | None = None, tests: list[str] | None = None) -> str:
        from ..swe import TEST_COMMAND

        return " ".join([TEST_COMMAND, *tests]) if tests else TEST_COMMAND


LANGUAGES: dict[str, Language] = {}


def apt_errors(output: str) -> str:
    """apt's own error lines of a failed base build (`E: Unable to locate package golang-x-dev`, the packages
    Debian lacks named once), else all of it: the reason comes before the list of packages tried, which can run
    to a hundred names."""
    errors = [line.strip()[3:] for line in output.splitlines() if line.strip().startswith("E: ")]
    missing = [e.rsplit(" ", 1)[-1] for e in errors if e.startswith("Unable to locate package ")]
    other = [e for e in errors if not e.startswith("Unable to locate package ")]
    found = ([f"Debian has no package {', '.join(missing)}"] if missing else []) + other
    return "; ".join(found) if found else output


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
    """The language of the project at `repo`, by its marker files (`language_of_root`)."""
    return language_of_root({p.name for p in repo.iterdir()} if repo.is_dir() else set())


def language_of_root(root: set[str]) -> Language:
    """The language of a project whose root holds the names `root`. Python where it marks Python, even beside
    another language's marker (a Python project with a package.json for its docs or front end, as Django's), and
    where nothing matches (a folder of plain modules has no marker)."""
    python = LANGUAGES["python"]
    if python.marks(root):
        return python
    return next((language for language in languages() if language.marks(root)), python)


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
