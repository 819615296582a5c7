"""Go: a module (`go.mod`) built and tested offline with Debian trixie's toolchain (`golang-go`, Go 1.24).

The tests run as SWE-bench Multilingual runs them, `go test -v` over the module's packages (or the packages
of the named test files), read by swebench's `parse_log_gotest` (`--- PASS: TestName (0.00s)`, subtests
as `TestName/sub`). The toolchain never downloads: `GOTOOLCHAIN=local` (a `toolchain` line asking for a
newer Go fails the build instead of fetching one), `GOPROXY=off`, and the build cache in /var/cache/go-build,
warmed with the standard library when the base image is built.

Modules beyond the standard library come from Debian's `golang-*-dev` packages, which install their
sources under /usr/share/gocode/src/<module path> (`GOCODE`). `vendor_script` copies each module a
go.mod requires from there into `vendor/`, with the `vendor/modules.txt` the go command checks against
go.mod, so the tests build with `-mod=vendor` at the version Debian ships (whatever version go.mod
names). A requirement Debian does not carry makes the project unbuildable offline, named by
`unbuildable` (with the Debian package that would carry it); with the internet, `GOPROXY` may name a
module proxy instead, and no vendoring is needed.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path, PurePosixPath

from ..grading.gotest import GoTest
from ..grading.runners import register_runner
from . import Language, register_language

GOCODE = "/usr/share/gocode/src"
# The go command's environment for an offline build: no toolchain or module downloads, a writable cache,
# and go.mod taken as it is (`-mod=mod`) unless the project vendors its requirements.
GOCACHE = "/var/cache/go-build"
ENVIRONMENT = f"export GOTOOLCHAIN=local GOPROXY=off GOSUMDB=off GOCACHE={GOCACHE} GOPATH=/tmp/go GOFLAGS=-mod=mod"
# The standard packages tests use most, compiled (and vetted) into the base image's build cache once: a
# sandbox's first `go test` then builds only the project, not the standard library under it.
_WARM_IMPORTS = (
    "bufio bytes context encoding/json errors fmt io math os path/filepath reflect regexp sort strconv "
    "strings sync testing time unicode unicode/utf8"
).split()
_WARM_TEST = "package warm\n\nimport (\n" + "".join(f'\t_ "{p}"\n' for p in _WARM_IMPORTS if p != "testing")
_WARM_TEST += '\t"testing"\n)\n\nfunc TestWarm(t *testing.T) {}\n'
_WARM = (
    # No /proc in the chroot the image is built in: the go command cannot find its GOROOT by itself there.
    "set -e; export GOROOT=$(dirname $(dirname $(readlink -f /usr/bin/go))); mkdir -p /tmp/warm && cd /tmp/warm && printf 'module warm\\n\\ngo 1.24\\n' > go.mod && "
    f"printf '%s' '{_WARM_TEST}' > warm_test.go && {ENVIRONMENT} && go test ./... && cd / && rm -rf /tmp/warm /tmp/go"
)
_REQUIRE = re.compile(r"^\s*(?:require\s+)?([\w.~-]+(?:/[\w.~-]+)*)\s+(v[\w.+-]+)(\s*//\s*indirect)?\s*$")


def requirements(go_mod: str) -> list[tuple[str, str, bool]]:
    """(module path, version, indirect) for each requirement of a go.mod, in its single-line or block form."""
    found, block = [], False
    for line in go_mod.splitlines():
        text = line.strip()
        if text.startswith("require") and text.endswith("("):
            block = True
            continue
        if block and text == ")":
            block = False
            continue
        if block or text.startswith("require "):
            if match := _REQUIRE.match(text):
                found.append((match.group(1), match.group(2), bool(match.group(3))))
    return found


def debian_package(module: str) -> str:
    """The Debian package that carries `module` by the Debian Go team's naming rule: the host reduced to
    its name (github.com -> github, golang.org -> golang), then the path, lower case, `/` and `_` as `-`."""
    host, _, rest = module.partition("/")
    labels = host.split(".")
    host_name = labels[-2] if len(labels) > 1 else labels[0]
    if labels[0] in ("gopkg", "go"):  # gopkg.in/yaml.v3, go.uber.org/zap, go.etcd.io/bbolt
        host_name = labels[-2] if labels[0] == "gopkg" else labels[1]
    name = "-".join(part for part in [host_name, *rest.split("/")] if part)
    return f"golang-{name.lower().replace('_', '-')}-dev"


def unbuildable(repo: Path, gocode: Path = Path(GOCODE)) -> str:
    """Why the module at `repo` cannot be built offline ("" when it can): each requirement that neither
    `vendor/` nor Debian's Go sources under `gocode` carry, with the package that would."""
    go_mod = repo / "go.mod"
    if not go_mod.is_file():
        return "no go.mod: not a Go module (GOPATH projects are not supported)"
    if (repo / "vendor" / "modules.txt").is_file():
        return ""
    missing = [
        f"{module} {version} (Debian package {debian_package(module)})"
        for module, version, _ in requirements(go_mod.read_text())
        if not (gocode / module).is_dir()
    ]
    return "requirements not available offline: " + ", ".join(missing) if missing else ""


def vendor_script(go_mod: str, gocode: str = GOCODE) -> str:
    """A shell script, run in the repository root, that vendors every requirement of `go_mod` from
    Debian's Go sources and fails naming the first one missing."""
    lines = ["set -e", "mkdir -p vendor", ": > vendor/modules.txt"]
    for module, version, _ in requirements(go_mod):
        source, target = shlex.quote(f"{gocode}/{module}"), shlex.quote(f"vendor/{module}")
        lines += [
            f"[ -d {source} ] || {{ echo 'unbuildable offline: {module} is not in {gocode} "
            f"(Debian package {debian_package(module)})' >&2; exit 3; }}",
            f"mkdir -p {shlex.quote(str(PurePosixPath('vendor', module).parent))} && cp -rL {source} {target}",
            # modules.txt names each module, then its packages (the folders with non-test Go files).
            f"printf '%s\\n' {shlex.quote(f'# {module} {version}')} '## explicit' >> vendor/modules.txt",
            f"(cd vendor && find {shlex.quote(module)} -name '*.go' ! -name '*_test.go' ! -path '*/testdata/*' "
            "-printf '%h\\n' | sort -u) >> vendor/modules.txt",
        ]
    return "\n".join(lines) + "\n"


class Go(Language):
    name = "go"
    title = "Go"
    aliases = ("golang",)
    markers = ("go.mod",)
    # gcc and the C headers: cgo, and `go test -race` (which needs cgo), as in the golang images
    packages = ("golang-go", "gcc", "libc6-dev")
    standins = ("golang:*",)
    log_parser = "parse_log_gotest"
    log_parsers = ("parse_log_gotest",)
    sources = (".go",)

    def base_recipe(self) -> dict:
        return {**super().base_recipe(), "prepare": _WARM}

    def test_command(self, repo: Path | None = None, tests: list[str] | None = None) -> str:
        """`go test -v` over the whole module, or the packages of `tests` (test files or package patterns).
        A vendored module builds from `vendor/` (the go command's default when vendor/modules.txt exists)."""
        packages = sorted({_package_of(t) for t in tests}) if tests else ["./..."]
        mode = "[ ! -f vendor/modules.txt ] || export GOFLAGS=-mod=vendor"
        return f"{ENVIRONMENT}; {mode}; go test -v -count=1 " + " ".join(shlex.quote(p) for p in packages)

    def runs_test_file(self, path: str) -> bool:
        return path.endswith("_test.go")  # not a testdata/ file

    def environment_packages(self, repo: Path) -> list[str]:
        """The Debian packages of go.mod's requirements (none when the module vendors them)."""
        if (repo / "vendor" / "modules.txt").is_file() or not (repo / "go.mod").is_file():
            return []
        return sorted({debian_package(module) for module, _, _ in requirements((repo / "go.mod").read_text())})

    def install_script(self, repo: Path) -> str:
        """Vendoring the requirements from Debian's Go sources (`vendor_script`), when there are any to vendor."""
        return vendor_script((repo / "go.mod").read_text()) if self.environment_packages(repo) else ""

    def is_test_path(self, path: str) -> bool:
        parts = PurePosixPath(path).parts
        return bool(parts) and (parts[-1].endswith("_test.go") or "testdata" in parts[:-1])

    def is_test_config(self, path: str) -> bool:
        """A workspace file (go.work) replaces modules the build reads."""
        return PurePosixPath(path).name in ("go.work", "go.work.sum")

    def is_test_config_edit(self, path: str, lines: list[str]) -> bool:
        """go.mod lines that redirect a module (`replace`, `exclude`) swap the code the tests build against,
        the module's own packages among them: a fix has no need of them."""
        return PurePosixPath(path).name == "go.mod" and replaces_modules(lines)


def replaces_modules(added_or_removed: list[str]) -> bool:
    """Whether go.mod lines redirect a module (a `replace` or `exclude` directive, or a line of their block)."""
    return any(re.match(r"^\s*(replace|exclude)\b|^\s*\S+(\s+v\S+)?\s+=>\s+\S", line) for line in added_or_removed)


def _package_of(test: str) -> str:
    """The package of a test file (`pkg/x_test.go` -> `./pkg`); a package pattern as it is."""
    if test.endswith(".go"):
        parent = str(PurePosixPath(test).parent)
        return "." if parent == "." else f"./{parent}"
    return test if test.startswith((".", "/")) or "/" in test else f"./{test}"


GO = register_language(Go())
register_runner(GoTest(), Go.log_parsers)
