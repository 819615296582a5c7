"""JavaScript and TypeScript: Node and npm from Debian trixie (Node 20 LTS, npm 9), TypeScript's `tsc` too.

The test command comes from `package.json`: its `scripts.test` names the runner, and the command runs that
runner in the form whose output a swebench parser reads, with the test files of a named list:

    node --test   node's built-in runner, `--test-reporter=tap`     parse_log_tap
    jest          `jest --verbose`                                   parse_log_jest
    vitest        `vitest run --reporter=verbose`                    parse_log_vitest
    mocha         `mocha --reporter tap`                             parse_log_tap
    tape          TAP is its own output                              parse_log_tap

A `pretest` script (a `tsc` build, ...) runs first; the TypeScript test files it compiled are then run from
tsc's output (`test/a.test.ts` -> `dist/test/a.test.js`, by tsconfig.json's `rootDir` and `outDir`), except by
jest and vitest, which compile TypeScript themselves.

The install step comes from the lock file: `package-lock.json` (or `npm-shrinkwrap.json`) is installed by
`npm ci`. The packages are fetched on the host, where the npm registry is reachable (`fetch_dependencies`),
into an npm cache that goes into the image, and installed from it with `npm ci --offline`: sandboxes have
no network. A project with a `yarn.lock` or `pnpm-lock.yaml` only, or with no lock file at all while it has
dependencies, is refused with that reason (`install_problem`): its dependencies cannot be pinned to what
the commit used without yarn or pnpm, which Debian trixie does not ship as a package manager for npm's
registry.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..grading.runners import ANSI, register_runner
from ..grading.jest_runner import Jest
from ..grading.tap_runner import Tap
from . import Language, Unbuildable, register_language

_SOURCE = r"\.[cm]?[jt]sx?$"
_TEST_FILE = re.compile(rf"[.\-_](test|spec)s?{_SOURCE}")
_TEST_FOLDERS = {"__tests__", "__mocks__", "__snapshots__", "__fixtures__"}
# Runner configuration: where a runner reads setup files, reporters, what to run and what to skip.
_CONFIG = re.compile(
    r"^(jest|vitest|vite|vitest\.workspace|karma|ava|playwright|cypress|wdio)\.conf(ig)?\.[cm]?[jt]s(on)?$"
    r"|^\.mocharc(\.[a-z]+)?$|^\.taprc(\.[a-z]+)?$|^\.c8rc(\.json)?$|^\.nycrc(\.[a-z]+)?$"
)
_LOCK_FILES = ("package-lock.json", "npm-shrinkwrap.json")
_OTHER_LOCKS = {"yarn.lock": "yarn", "pnpm-lock.yaml": "pnpm"}
NPM_CACHE = "/opt/npm-cache"  # where the fetched packages lie in an image


@dataclass(frozen=True)
class JsRunner:
    """A test runner of package.json's test script: how it is called on a file list, and what reads its output."""

    name: str
    binary: str  # the executable the script names
    command: str  # the command that runs it, with `{files}` for the test files (empty: the runner's own search)
    log_parser: str
    runs_typescript: bool = False  # it compiles TypeScript test files itself (else it runs what tsc wrote)
    output_filter: str = ""  # a command its output is piped through before the parser reads it


# tape's TAP names each assertion by its message alone ("ok 7 should be equal"), the same in many tests, and
# swebench's parse_log_tap keys results by that name: the later result of a name hides the earlier. Each
# result is named by its test (the `# name` line before it) and its message, numbered when a test repeats
# a message: "ok 7 parse numbers > should be equal #2". The eval script's pipefail keeps tape's exit status.
TAPE_NAMES = (
    'awk \'/^# /{t=substr($0,3); split("", n)} '
    "match($0,/^(not )?ok [0-9]+ /){m=substr($0,RLENGTH+1); k=++n[m]; "
    'print substr($0,1,RLENGTH) t " > " m (k>1 ? " #" k : ""); next} {print}\''
)


RUNNERS = (
    JsRunner("node", "node", "node --test --test-reporter=tap {files}", "parse_log_tap"),
    JsRunner("jest", "jest", "./node_modules/.bin/jest --verbose {files}", "parse_log_jest", True),
    JsRunner("vitest", "vitest", "./node_modules/.bin/vitest run --reporter=verbose {files}", "parse_log_vitest", True),
    JsRunner("mocha", "mocha", "./node_modules/.bin/mocha --reporter tap {files}", "parse_log_tap"),
    JsRunner("tape", "tape", "./node_modules/.bin/tape {files}", "parse_log_tap", output_filter=TAPE_NAMES),
)


# In package.json only the test scripts and the runners' settings are put back; other edits (dependencies) stay.
# A runner's settings block spans lines: its keys are known by name too (jest's setupFiles, mocha's require).
_PACKAGE_JSON_TEST_CONFIG = re.compile(
    r'"(?:pre|post)?test(?::[^"]*)?"\s*:|"(?:jest|mocha|ava|vitest|tap|tape|c8|nyc|karma)"\s*:'
    r'|"(?:setupFiles\w*|globalSetup|globalTeardown|reporters?|testMatch|testRegex|testPathIgnorePatterns|roots'
    r'|transform\w*|moduleNameMapper|testEnvironment\w*|spec|extension|ui|loader|node-arg)"\s*:'
)


class ProjectError(Unbuildable):
    """A JavaScript project that cannot be built or tested here, with the reason."""


def package_json(repo: Path) -> dict:
    path = repo / "package.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ProjectError(f"{repo}: no package.json") from None
    except json.JSONDecodeError as err:
        raise ProjectError(f"{path}: not JSON ({err})") from None


def find_runner(repo: Path) -> JsRunner:
    """The runner `scripts.test` of package.json calls, directly or through the scripts it runs (`npm run
    tests-only`, whose script is `nyc tape 'test/*.js'`)."""
    scripts = package_json(repo).get("scripts", {})
    script = scripts.get("test", "")
    if not script or "no test specified" in script:
        raise ProjectError("package.json has no test script (scripts.test)")
    seen, pending = {"test"}, [script]
    while pending:
        words = [w for w in re.split(r"[\s;&|()]+", pending.pop(0)) if w]
        for word in words:
            name = PurePosixPath(word).name
            for runner in RUNNERS:
                if name == runner.binary and (runner.name != "node" or "--test" in words):
                    return runner
        called = [second for first, second in zip(words, words[1:]) if first in ("run", "run-script")]
        for i, word in enumerate(words):
            if PurePosixPath(word).name in _SCRIPT_RUNNERS:  # npm-run-all's script names and patterns (`test:*`)
                called += [name for w in words[i + 1 :] for name in scripts if _script_pattern(w).fullmatch(name)]
        for name in called:
            if name in scripts and name not in seen:
                seen.add(name)
                pending.append(scripts[name])
    supported = ", ".join(r.name if r.name != "node" else "node --test" for r in RUNNERS)
    raise ProjectError(f"package.json's test script calls no runner known here ({supported}): {script!r}")


_SCRIPT_RUNNERS = ("run-s", "run-p", "npm-run-all")


def _script_pattern(word: str) -> re.Pattern:
    """npm-run-all's pattern of script names: `*` within a `:`-separated part, `**` across parts."""
    parts = re.split(r"(\*\*|\*)", word.strip("'\""))
    return re.compile("".join({"**": ".*", "*": "[^:]*"}.get(part, re.escape(part)) for part in parts))


def _build_step(pretest: str) -> str:
    """The `pretest` script where it builds (`tsc`, `npm run build`); "" where it only lints (`npm run lint`,
    `eslint .`): a linter's verdict on a fix is not the tests', and its output is not the runner's."""
    words = set(re.split(r"[\s;&|()]+", pretest.lower()))
    linting = {"lint", "eslint", "standard", "xo", "prettier", "tslint", "jshint", "semistandard"}
    return "" if words & linting and not any("build" in w or w in ("tsc", "babel") for w in words) else pretest


def _ts_output(repo: Path, path: str) -> str:
    """Where tsc writes the JavaScript of `path` (a .ts/.tsx/.mts/.cts file): by tsconfig.json's rootDir and outDir."""
    try:
        options = json.loads((repo / "tsconfig.json").read_text()).get("compilerOptions", {})
    except (FileNotFoundError, json.JSONDecodeError):
        options = {}
    out = options.get("outDir")
    js = re.sub(r"\.([cm]?)tsx?$", r".\1js", path)
    if not out:
        return js
    root = PurePosixPath(options.get("rootDir", ".")).as_posix().removeprefix("./").strip("/")
    relative = PurePosixPath(js)
    if root not in ("", "."):
        if not relative.is_relative_to(root):
            return js  # outside rootDir: tsc would refuse to build it
        relative = relative.relative_to(root)
    return (PurePosixPath(out) / relative).as_posix().removeprefix("./")


def npm_errors(stderr: str) -> str:
    """npm's own error lines (`npm error ...`, `npm ERR! ...`), without the pointer to its debug log: the reason
    a failed npm command gives, which its warnings (dozens of `EBADENGINE`, `deprecated`) would bury."""
    errors = [
        m.group(1)
        for line in stderr.splitlines()
        if (m := re.match(r"npm (?:error|ERR!) ?(.*)", line))
        and m.group(1).strip()
        and not m.group(1).startswith("A complete log of this run")
        and "/_logs/" not in m.group(1)
    ]
    return " ".join(errors)[:1500] if errors else stderr.strip()[-1500:]


class JavaScript(Language):
    name = "javascript"
    title = "JavaScript/TypeScript"
    aliases = ("js", "typescript", "ts", "node")
    markers = ("package.json",)
    packages = ("nodejs", "npm", "node-typescript")
    standins = ("node:*",)
    log_parser = "parse_log_tap"
    log_parsers = ("parse_log_tap", "parse_log_jest", "parse_log_jest_json", "parse_log_vitest", "parse_log_karma")
    sources = (".js", ".jsx", ".ts", ".tsx", ".cjs", ".mjs", ".cts", ".mts")

    def log_parser_for(self, repo: Path) -> str:
        return find_runner(repo).log_parser

    def test_command(self, repo: Path | None = None, tests: list[str] | None = None) -> str:
        if repo is None:
            raise ProjectError("the JavaScript test command is read from the project's package.json: give its repo")
        runner = find_runner(repo)
        pretest = _build_step(package_json(repo).get("scripts", {}).get("pretest", ""))
        files = []
        for test in tests or []:
            path = test.split("::", 1)[0]
            if pretest and not runner.runs_typescript and re.search(r"\.[cm]?tsx?$", path):
                path = _ts_output(repo, path)  # the pretest build compiled it
            files.append(shlex.quote(path))
        command = runner.command.format(files=" ".join(dict.fromkeys(files))).rstrip()
        if runner.output_filter:
            command = f"{command} | {runner.output_filter}"
        return f"{pretest} && {command}" if pretest else command

    def is_test_path(self, path: str) -> bool:
        parts = PurePosixPath(path).parts
        return bool(parts) and bool(
            _TEST_FILE.search(parts[-1]) or (re.search(_SOURCE, parts[-1]) and _TEST_FOLDERS & set(parts[:-1]))
        )

    def is_test_config(self, path: str) -> bool:
        return bool(_CONFIG.match(PurePosixPath(path).name))

    def is_test_config_edit(self, path: str, lines: list[str]) -> bool:
        """package.json's test scripts and runners' settings; its other edits (dependencies, exports) stay."""
        return PurePosixPath(path).name == "package.json" and any(_PACKAGE_JSON_TEST_CONFIG.search(l) for l in lines)

    # The install step.

    def install_problem(self, repo: Path) -> str:
        """Why the project's dependencies cannot be installed offline ("" when they can)."""
        try:
            manifest = package_json(repo)
        except ProjectError as err:
            return str(err)
        if any((repo / lock).exists() for lock in _LOCK_FILES):
            return ""
        if not (manifest.get("dependencies") or manifest.get("devDependencies")):
            return ""
        for lock, tool in _OTHER_LOCKS.items():
            if (repo / lock).exists():
                return (
                    f"dependencies are locked by {lock} only; {tool} is not installed here, "
                    "and npm cannot install that lock file's versions (a package-lock.json is needed)"
                )
        return "dependencies but no lock file (the versions the commit used are unknown)"

    def install_command(self, repo: Path) -> str:
        """The image's install step ("" when the project has no dependencies): `npm ci` from the fetched cache."""
        if problem := self.install_problem(repo):
            raise ProjectError(problem)
        if not any((repo / lock).exists() for lock in _LOCK_FILES):
            return ""
        return f"npm ci --offline --no-audit --no-fund --cache {NPM_CACHE}"

    def fetch_dependencies(self, repo: Path, cache: Path, timeout: float = 900.0) -> None:
        """Fill the npm cache `cache` with the packages of the project's lock file, from the registry (on the
        host: it needs the network). The install scripts are not run here: they run in the image."""
        if problem := self.install_problem(repo):
            raise ProjectError(problem)
        if not any((repo / lock).exists() for lock in _LOCK_FILES):
            return
        cache.mkdir(parents=True, exist_ok=True)
        scratch = cache.parent / f"{cache.name}.install"
        subprocess.run(["rm", "-rf", str(scratch)], check=True)
        scratch.mkdir()
        for name in ("package.json", *_LOCK_FILES):
            if (repo / name).exists():
                (scratch / name).write_bytes((repo / name).read_bytes())
        try:
            result = subprocess.run(
                ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--cache", str(cache)],
                cwd=scratch,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except FileNotFoundError:
            raise ProjectError("npm is not installed on this machine: it fetches the dependencies") from None
        finally:
            subprocess.run(["rm", "-rf", str(scratch)], check=False)
        if result.returncode:
            raise ProjectError(f"npm could not fetch the dependencies: {npm_errors(result.stderr)}")

    def build_image(self, repo: Path, tag: str, workdir: str = "/testbed") -> str:
        """An image of the project at `repo` on this language's base: the tree in `workdir`, its dependencies
        fetched here and installed there offline (`npm ci`, install scripts included). Returns `tag`."""
        import tempfile

        from sandboxes import SandboxError
        from sandboxes.images import build_base_image, build_image

        install = self.install_command(repo)
        base = build_base_image(self.base_recipe())
        with tempfile.TemporaryDirectory(prefix="harness-npm-") as scratch:
            cache = Path(scratch) / "npm-cache"
            self.fetch_dependencies(repo, cache)
            cache.mkdir(exist_ok=True)
            steps = [f"FROM {base}", f"COPY npm-cache {NPM_CACHE}", f"COPY repo {workdir}", f"WORKDIR {workdir}"]
            if install:  # in a git work tree, as in a clone: install scripts such as husky's `prepare` expect one
                steps.append(f"RUN git init -q && {install} && rm -rf .git {NPM_CACHE}")
            try:
                build_image(
                    tag, "\n".join(steps) + "\n", {"npm-cache": cache, "repo": repo}, {"harness.language": self.name}
                )
            except SandboxError as err:  # an install script of the project or a package failed: its reason
                raise ProjectError(f"the install step (npm ci) failed: {npm_errors(ANSI.sub('', str(err)))}") from None
        return tag


register_language(JavaScript())
register_runner(Tap(), ("parse_log_tap",))
register_runner(Jest(), ("parse_log_jest",))
