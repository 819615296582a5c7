"""Rust: a crate with a `Cargo.toml`, built and tested by `cargo test` from Debian's toolchain.

Debian trixie ships rustc and cargo 1.85. Crates beyond the standard library come from Debian's
`librust-*-dev` packages, which install their sources as a local directory registry under
`/usr/share/cargo/registry`: the test command replaces crates.io with it (`--config` on the command line,
which outranks any `.cargo/config.toml`) and runs `--offline`. A crate whose dependencies are not there is
reported unbuildable with the crate cargo could not find (`build_problem`); `crate_packages` names the
Debian packages a project's dependencies come in (trixie has about 3,250 `librust-*-dev`). With the internet,
`HARNESS_CARGO_SOURCE=crates-io` drops the replacement and lets cargo fetch from crates.io.

The target directory lies outside the repository (`/tmp/harness-cargo-target`): a `target/` a patch
commits is never what runs, and the repository's git status stays that of the sources.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path, PurePosixPath

from ..grading.cargo_test import CargoTest
from ..grading.runners import register_runner
from . import Language, register_language

DEBIAN_REGISTRY = "/usr/share/cargo/registry"
CARGO_SOURCES = ("debian", "crates-io")
TARGET_DIR = "/tmp/harness-cargo-target"
# The runner settings of Cargo.toml: test targets and how they run, and the profile tests are built with.
_MANIFEST_TEST_SETTINGS = re.compile(
    r"^\s*\[\[(?:test|bench)\]\]|^\s*\[profile\.(?:test|bench)\b|^\s*(?:harness|test|doctest|bench)\s*="
    r"|^\s*auto(?:tests|benches)\s*="
)
# A build script runs before the tests with the repository writable: what it must not start doing in a fix.
_BUILD_SCRIPT_EFFECTS = re.compile(
    r"\b(?:fs::(?:write|copy|rename|remove_\w+|create_dir\w*|set_permissions|hard_link)|File::create|OpenOptions"
    r"|Command::new|process::Command|include_str!|include_bytes!)"
)
# Code that exists, or behaves differently, only when the crate is compiled for its tests.
_CFG_NOT_TEST = re.compile(r"cfg\s*\(\s*not\s*\(\s*test\s*\)|cfg!\s*\([^)]*\btest\b|cfg_attr\s*\([^,]*\btest\b")
_CFG_TEST = re.compile(r"^\s*#\s*\[\s*cfg\s*\((?:.*\W)?test\b")
_TEST_ONLY_ITEMS = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:mod|use|extern\s+crate)\b")
_MISSING_CRATE = re.compile(r"no matching package named `([^`]+)` found")
_NO_VERSION = re.compile(r"failed to select a version for the requirement (`[^`]+`)( \(locked to [^)]+\))?")
_NO_VERSION_FOUND = re.compile(r"candidate versions found which didn't match: (.+)")
_OFFLINE = re.compile(r"(?:attempting to make an HTTP request, but --offline was specified|failed to download)")
_NOT_COMPILED = re.compile(r"^error: could not compile `([^`]+)`(.*)$", re.M)


def crate_packages(repo: Path) -> list[str]:
    """The Debian packages (`librust-<crate>-dev`) that put the crate's dependencies, dev and build
    dependencies included, into the offline registry: what a Rust project's base adds to `packages`."""
    tables = []
    for manifest in _manifests(repo):
        tables += [manifest, manifest.get("workspace", {}), *manifest.get("target", {}).values()]
    crates = set()
    for table in tables:
        for kind in ("dependencies", "dev-dependencies", "build-dependencies"):
            for name, spec in table.get(kind, {}).items():
                if isinstance(spec, dict) and ("path" in spec or spec.get("workspace")):
                    continue  # a crate of the same repository, or one [workspace.dependencies] names
                crates.add(spec.get("package", name) if isinstance(spec, dict) else name)
    return sorted(f"librust-{crate.lower().replace('_', '-')}-dev" for crate in crates)


def _manifests(repo: Path) -> list[dict]:
    """The root Cargo.toml and those of its workspace's members (`members = ["crates/*"]`, less `exclude`)."""
    import tomllib

    root = tomllib.loads((repo / "Cargo.toml").read_text())
    workspace = root.get("workspace", {})
    excluded = {(repo / path).resolve() for path in workspace.get("exclude", [])}
    patterns = [pattern for pattern in workspace.get("members", []) if pattern.strip("./")]  # not "." (the root)
    members = {path.resolve() for pattern in patterns for path in repo.glob(pattern)}
    return [root] + [
        tomllib.loads((member / "Cargo.toml").read_text())
        for member in sorted(members - excluded - {repo.resolve()})
        if (member / "Cargo.toml").is_file()
    ]


def cargo_source() -> str:
    """Where crates come from: Debian's packaged registry (offline, the default) or crates.io."""
    source = os.environ.get("HARNESS_CARGO_SOURCE", "debian")
    if source not in CARGO_SOURCES:
        raise ValueError(f"HARNESS_CARGO_SOURCE={source!r}: use one of {', '.join(CARGO_SOURCES)}")
    return source


def cargo_targets(tests: list[str]) -> list[str]:
    """cargo's target flags (`--test it`, `--lib`) for test files; test names become filters after `--`."""
    flags: list[tuple[str, ...]] = []
    filters: list[str] = []
    for test in tests:
        path = PurePosixPath(test)
        if path.suffix != ".rs":
            filters.append(test)
            continue
        parts = path.parts
        kinds = {"tests": "--test", "benches": "--bench", "examples": "--example"}
        if parts[0] in kinds and len(parts) >= 2:
            # tests/it.rs is the target `it`; tests/it/main.rs too; tests/common/mod.rs belongs to no target of its own.
            name = path.stem if len(parts) == 2 else parts[1] if parts[-1] == "main.rs" else ""
            flag = (kinds[parts[0]], name) if name else ("--tests",)
        elif parts[0] == "src" and parts[-1] == "main.rs" or "bin" in parts[:2]:
            flag = ("--bins",)
        else:
            flag = ("--lib",)
        if flag not in flags:
            flags.append(flag)
    return [word for flag in flags for word in flag] + (["--", *filters] if filters else [])


class Rust(Language):
    name = "rust"
    title = "Rust"
    aliases = ("rs",)
    markers = ("Cargo.toml",)
    packages = ("rustc", "cargo")
    standins = ("rust:*",)
    log_parser = "parse_log_cargo"
    log_parsers = ("parse_log_cargo",)
    sources = (".rs",)

    def environment_packages(self, repo: Path) -> list[str]:
        return crate_packages(repo) if (repo / "Cargo.toml").is_file() else []

    def test_command(self, repo: Path | None = None, tests: list[str] | None = None) -> str:
        env = (
            f"CARGO_HOME=/tmp/harness-cargo-home CARGO_TARGET_DIR={TARGET_DIR} CARGO_TERM_COLOR=never RUST_BACKTRACE=0"
        )
        cargo = ["cargo"]
        if cargo_source() == "debian":
            cargo += [
                "--config",
                'source.crates-io.replace-with="debian"',
                "--config",
                f'source.debian.directory="{DEBIAN_REGISTRY}"',
            ]
        cargo += ["test", "--no-fail-fast"]
        if cargo_source() == "debian":
            cargo.append("--offline")
        return f"{env} {shlex.join([*cargo, *cargo_targets(tests or [])])}"

    def is_test_path(self, path: str) -> bool:
        """A crate's `tests/` and `benches/` (the top-level folders or a workspace member's), and the
        unit-test module files `tests.rs` / `test.rs` that `#[cfg(test)] mod tests;` pulls in."""
        parts = PurePosixPath(path).parts
        if not parts or not parts[-1].endswith(".rs"):
            return False
        return "benches" in parts[:-1] or "tests" in parts[:-1] or parts[-1] in ("tests.rs", "test.rs")

    def is_test_config(self, path: str) -> bool:
        """Cargo's own configuration (it can set rustflags, a runner that replaces the test binaries, `[env]`)."""
        parts = PurePosixPath(path).parts
        return len(parts) >= 2 and parts[-2] == ".cargo" and parts[-1] in ("config", "config.toml")

    def is_test_config_edit(self, path: str, lines: list[str]) -> bool:
        """Whether the changed `lines` of `path` are runner settings: Cargo.toml's test targets (`[[test]]`,
        `harness = false`, `test = false`, `autotests`) and its test and bench profiles."""
        return PurePosixPath(path).name == "Cargo.toml" and any(_MANIFEST_TEST_SETTINGS.search(l) for l in lines)

    def refusals(self, path: str, added: list[str]) -> list[str]:
        """A build script (`build.rs`) that adds file writes or program runs: it runs when `cargo test` builds,
        before any test, and could rewrite the tests; Cargo.toml pointing at another build script; and source
        that exists only under test (`#[cfg(test)]` on anything but a test module or import, `cfg(not(test))`,
        `cfg!(test)`): it swaps the code the unit tests see for a stub."""
        name = PurePosixPath(path).name
        found = []
        if name == "build.rs" and any(_BUILD_SCRIPT_EFFECTS.search(line) for line in added):
            found.append(
                "build script that writes files or runs programs (it runs before the tests and can rewrite them)"
            )
        if name == "Cargo.toml" and any(re.match(r"\s*build\s*=", line) for line in added):
            found.append("points cargo at another build script (install-time code)")
        if name.endswith(".rs") and not self.is_test_path(path) and _test_only_code(added):
            found.append("added code that exists or behaves differently only under test (a #[cfg(test)] stub)")
        return found

    def build_problem(self, log: str) -> str:
        """Why cargo built nothing to test, from its log ("" when it got as far as running tests)."""
        if match := _NO_VERSION.search(log):
            found = _NO_VERSION_FOUND.search(log)
            return (
                f"unbuildable: no version of {match.group(1)}{match.group(2) or ''} in the offline registry "
                f"({DEBIAN_REGISTRY}{f', which has {found.group(1)}' if found else ''}); set "
                "HARNESS_CARGO_SOURCE=crates-io where the sandbox reaches crates.io"
            )
        if match := _MISSING_CRATE.search(log):
            return (
                f"unbuildable: the crate `{match.group(1)}` is not in the offline registry ({DEBIAN_REGISTRY}, "
                "Debian's librust-*-dev packages); add its package to the base or set HARNESS_CARGO_SOURCE=crates-io "
                "where the sandbox reaches crates.io"
            )
        if _OFFLINE.search(log):
            return "unbuildable: cargo needed the network to fetch a dependency (offline build)"
        if match := _NOT_COMPILED.search(log):
            return f"cargo could not compile `{match.group(1)}`{match.group(2)}: no tests ran"
        return ""


def _test_only_code(added: list[str]) -> bool:
    code = [line for line in added if line.strip() and not line.strip().startswith("//")]
    for i, line in enumerate(code):
        if _CFG_NOT_TEST.search(line):
            return True
        if _CFG_TEST.match(line):
            item = next((l for l in code[i + 1 :] if not l.strip().startswith("#")), "")
            if not _TEST_ONLY_ITEMS.match(item):
                return True
    return False


RUST = register_language(Rust())
register_runner(CargoTest(), RUST.log_parsers)
