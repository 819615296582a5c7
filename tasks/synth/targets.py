"""What synthesis needs of each language, keyed by the language's registered name: how to find candidate
bugs, whether a mutated file still parses, and how to build the project image and find its test command.

A language without an entry here is refused by `harness tasks synth` with the list of those that have one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..languages import Language, detect_language, languages
from .errors import SynthError
from .mutations import Mutation


@dataclass(frozen=True)
class SynthTarget:
    find_mutations: Callable[[Path], list[Mutation]]
    compiles: Callable[[bytes, str], bool]
    # (project, test command or None, on_step, python) -> ProjectImage
    project_image: Callable[..., object]
    log_parser: Callable[[Path], str]  # the swebench parser of the test command's output, for the project at a path


TARGETS: dict[str, SynthTarget] = {}


def register_target(language: Language, target: SynthTarget) -> None:
    TARGETS[language.name] = target


def target_for(root: Path) -> tuple[Language, SynthTarget]:
    """The language of the project at `root` and its synthesis entry."""
    language = detect_language(root)
    if language.name not in TARGETS:
        known = ", ".join(l.title for l in languages() if l.name in TARGETS)
        raise SynthError(f"{root.name} is a {language.title} project; bugs are synthesized in {known} projects")
    return language, TARGETS[language.name]


def _register() -> None:
    from ..languages import LANGUAGES
    from . import js_mutations, js_project, mutations, project_image

    register_target(
        LANGUAGES["python"],
        SynthTarget(
            mutations.find_mutations,
            mutations.compiles,
            project_image.python_project_image,
            lambda root: "parse_log_pytest",
        ),
    )
    register_target(
        LANGUAGES["javascript"],
        SynthTarget(
            js_mutations.find_mutations, js_mutations.compiles, js_project.build_js_project_image, js_project.log_parser
        ),
    )


_register()
