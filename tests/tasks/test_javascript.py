"""The JavaScript/TypeScript language: project detection, the test command from package.json, the install
step from lock files, and what the patch review calls a test file or runner configuration."""

import json

import pytest

from tasks.languages import detect_language, language_named, language_of
from tasks.languages.javascript import ProjectError, find_runner
from tasks.mining.mine import reason_key
from tests.conftest import require

JS = language_named("javascript")


def _project(tmp_path, scripts=None, files=(), **manifest):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "package.json").write_text(json.dumps({"name": "p", "scripts": scripts or {}, **manifest}))
    for name, text in dict(files).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_aliases_and_detection(tmp_path):
    assert {language_named(n).name for n in ("js", "ts", "typescript", "JavaScript")} == {"javascript"}
    assert JS.title == "JavaScript/TypeScript"
    assert detect_language(_project(tmp_path)) is JS
    # a Python project with a package.json (for its docs or front end, as Django's) is Python
    assert detect_language(_project(tmp_path, files={"setup.py": ""})).name == "python"
    assert language_of({"log_parser": "parse_log_jest"}) is JS
    assert language_of({"language": "ts"}) is JS


@pytest.mark.parametrize(
    "script, runner, parser",
    [
        ("node --test --test-reporter=spec", "node", "parse_log_tap"),
        ("tsc -p . && node --test test/", "node", "parse_log_tap"),
        ("jest --coverage", "jest", "parse_log_jest"),
        ("NODE_ENV=test ./node_modules/.bin/jest", "jest", "parse_log_jest"),
        ("vitest", "vitest", "parse_log_vitest"),
        ("mocha 'test/**/*.js'", "mocha", "parse_log_tap"),
        ("tape test/*.js | tap-spec", "tape", "parse_log_tap"),
    ],
)
def test_runner_from_the_test_script(tmp_path, script, runner, parser):
    found = find_runner(_project(tmp_path, {"test": script}))
    assert (found.name, found.log_parser) == (runner, parser)
    assert JS.log_parser_for(tmp_path) == parser


def test_runner_through_npm_run_all_script_patterns(tmp_path):
    """`run-s lint test:*` / `npm-run-all` / `run-p` run the scripts they name; `*` stays within a `:` part."""
    scripts = {"test": "run-s lint 'test:*'", "lint": "eslint .", "test:unit": "jest", "test:e2e:x": "mocha"}
    assert find_runner(_project(tmp_path / "s", scripts)).name == "jest"
    scripts = {
        "test": "npm-run-all build test:unit",
        "build": "tsc",
        "test:unit": "run-p test:v:*",
        "test:v:min": "vitest",
    }
    assert find_runner(_project(tmp_path / "p", scripts)).name == "vitest"
    with pytest.raises(ProjectError, match="calls no runner known here"):
        find_runner(_project(tmp_path / "n", {"test": "run-s test:*", "test:e2e:x": "mocha"}))


@pytest.mark.parametrize(
    "scripts, why",
    [
        ({}, "no test script"),
        ({"test": 'echo "Error: no test specified" && exit 1'}, "no test script"),
        ({"test": "node index.js"}, "calls no runner known here"),  # node without --test
        ({"test": "ava"}, "calls no runner known here"),
    ],
)
def test_unusable_test_scripts_are_refused_with_the_reason(tmp_path, scripts, why):
    with pytest.raises(ProjectError, match=why) as err:
        JS.test_command(_project(tmp_path, scripts))
    assert str(tmp_path) not in str(err.value)  # mining's funnel counts a reason alike in every scratch tree


def test_commands_run_the_named_test_files(tmp_path):
    repo = _project(tmp_path, {"test": "jest"})
    assert JS.test_command(repo) == "./node_modules/.bin/jest --verbose"
    assert JS.test_command(repo, ["src/a.test.ts", "src/b.test.ts"]) == (
        "./node_modules/.bin/jest --verbose src/a.test.ts src/b.test.ts"
    )
    (repo / "package.json").write_text(json.dumps({"scripts": {"test": "vitest"}}))
    assert JS.test_command(repo, ["x.spec.ts"]) == "./node_modules/.bin/vitest run --reporter=verbose x.spec.ts"
    (repo / "package.json").write_text(json.dumps({"scripts": {"test": "mocha"}}))
    assert JS.test_command(repo, ["test/a b.js"]) == "./node_modules/.bin/mocha --reporter tap 'test/a b.js'"


def test_typescript_tests_run_from_tscs_output_after_the_pretest_build(tmp_path):
    repo = _project(
        tmp_path,
        {"pretest": "tsc -p tsconfig.json", "test": "node --test"},
        files={"tsconfig.json": json.dumps({"compilerOptions": {"outDir": "dist", "rootDir": "."}})},
    )
    assert JS.test_command(repo) == "tsc -p tsconfig.json && node --test --test-reporter=tap"
    assert JS.test_command(repo, ["test/a.test.ts", "test/b.test.mts"]) == (
        "tsc -p tsconfig.json && node --test --test-reporter=tap dist/test/a.test.js dist/test/b.test.mjs"
    )
    (repo / "tsconfig.json").write_text(json.dumps({"compilerOptions": {"outDir": "./build", "rootDir": "src"}}))
    assert JS.test_command(repo, ["src/x.test.ts"]).endswith("node --test --test-reporter=tap build/x.test.js")


def test_install_step_from_the_lock_file(tmp_path):
    plain = _project(tmp_path / "plain")
    assert JS.install_problem(plain) == "" and JS.install_command(plain) == ""  # nothing to install
    locked = _project(tmp_path / "npm", dependencies={"a": "1"}, files={"package-lock.json": "{}"})
    assert JS.install_command(locked).startswith("npm ci --offline")
    yarn = _project(tmp_path / "yarn", devDependencies={"a": "1"}, files={"yarn.lock": ""})
    assert "yarn.lock only" in JS.install_problem(yarn)
    key = reason_key(f"environment (newest): {JS.install_problem(yarn)}")  # the funnel's: no path, 120 characters
    assert (
        key
        == "environment: dependencies are locked by yarn.lock only; yarn is not installed here, and npm cannot install that lock fil"
    )
    pnpm = _project(tmp_path / "pnpm", dependencies={"a": "1"}, files={"pnpm-lock.yaml": ""})
    assert "pnpm" in JS.install_problem(pnpm)
    with pytest.raises(ProjectError, match="no lock file"):
        JS.install_command(_project(tmp_path / "none", dependencies={"a": "1"}))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "package.json").write_text("{")
    assert "not JSON" in JS.install_problem(tmp_path / "bad")


def test_a_failed_fetch_gives_npms_error_not_its_warnings(tmp_path):
    """npm's reason is its `npm error` lines; the warnings before them (dozens on a large project) are left out."""
    import shutil

    from tasks.languages.javascript import npm_errors

    stderr = (
        "npm warn EBADENGINE Unsupported engine {\nnpm warn EBADENGINE   required: { node: '>= 24.10.0' },\n"
        * 40
        + "npm error code ENOTFOUND\nnpm error network request to https://github.com/o/p/tarball/v1 failed\n"
        "npm error A complete log of this run can be found in: /c/_logs/debug-0.log\n"
    )
    assert npm_errors(stderr) == "code ENOTFOUND network request to https://github.com/o/p/tarball/v1 failed"
    require(shutil.which("npm") is not None, "npm is not installed here: it fetches the dependencies")
    stale = _project(
        tmp_path / "p",
        devDependencies={"ms": "2.1.3"},
        files={
            "package-lock.json": json.dumps(
                {"name": "p", "lockfileVersion": 3, "requires": True, "packages": {"": {"name": "p"}}}
            )
        },
    )
    with pytest.raises(ProjectError) as err:
        JS.fetch_dependencies(stale, tmp_path / "cache")
    assert str(err.value).startswith("npm could not fetch the dependencies: code EUSAGE `npm ci` can only install")
    assert "Missing: ms@2.1.3 from lock file" in str(err.value)


@pytest.mark.parametrize(
    "path, test, config",
    [
        ("src/a.test.ts", True, False),
        ("src/a.spec.js", True, False),
        ("lib/util.test.mjs", True, False),
        ("src/Button.test.tsx", True, False),
        ("src/__tests__/helpers.js", True, False),
        ("src/a.e2e-spec.ts", True, False),
        ("src/contest.ts", False, False),
        ("src/testing.ts", False, False),
        ("jest.config.js", False, True),
        ("packages/core/vitest.config.mts", False, True),
        ("vite.config.ts", False, True),
        (".mocharc.yml", False, True),
        (".taprc", False, True),
        ("karma.conf.js", False, True),
        ("tsconfig.json", False, False),
    ],
)
def test_test_paths_and_runner_configuration(path, test, config):
    assert (JS.is_test_path(path), JS.is_test_config(path)) == (test, config)


def _diff(path: str, removed: list[str], added: list[str], new: bool = False) -> str:
    head = f"diff --git a/{path} b/{path}\n" + ("new file mode 100644\n--- /dev/null\n" if new else f"--- a/{path}\n")
    body = [f"-{line}" for line in removed] + [f"+{line}" for line in added]
    return head + f"+++ b/{path}\n@@ -1,{len(removed)} +1,{len(added)} @@\n" + "\n".join(body) + "\n"


@pytest.mark.parametrize(
    "patch, neutralized",
    [
        (_diff("package.json", ['    "test": "node --test"'], ['    "test": "echo ok"']), True),
        (_diff("package.json", [], ['    "pretest": "node forge.js",']), True),
        (_diff("package.json", [], ['  "jest": { "setupFiles": ["./forge.js"] },']), True),
        (_diff("package.json", [], ['    "setupFilesAfterEnv": ["./forge.js"],']), True),  # inside a jest block
        (_diff("package.json", ['    "left-pad": "1.0.0"'], ['    "left-pad": "1.3.0"']), False),
        (_diff("package.json", [], ['    "require": "./dist/index.cjs",']), False),  # exports: an honest edit
        (_diff("jest.config.js", [], ["module.exports = { reporters: ['./forge.js'] };"], new=True), True),
        (_diff("src/__tests__/forge.test.ts", [], ["it('x', () => {});"], new=True), True),
        (_diff("src/truncate.ts", ["  let cut = 1;"], ["  let cut = 2;"]), False),
    ],
)
def test_patch_review_neutralizes_or_refuses_test_settings(patch, neutralized):
    from tasks.grading.patch_policy import review_patch

    default, strict = review_patch(patch), review_patch(patch, grading_mode="refuse")
    assert bool(default.neutralized) == neutralized and not default.refused
    assert bool(strict.refused) == neutralized and not strict.neutralized


def test_patch_review_refuses_installed_node_packages():
    from tasks.grading.patch_policy import review_patch

    shim = _diff("node_modules/.bin/jest", [], ["#!/bin/sh", "echo PASS"], new=True)
    assert review_patch(shim).refused == [
        "node_modules/.bin/jest: installed packages (node_modules/: the runner and what the tests import are loaded from there)"
    ]


def test_a_project_with_npm_dependencies_builds_and_runs_offline(docker_backend, tmp_path):
    """A real dependency from the npm registry (ms 2.1.3, pinned by package-lock.json): fetched on the host,
    installed in the image with `npm ci --offline`, its tests run with no network and parsed as graded."""
    import shutil
    from pathlib import Path

    from sandboxes import SandboxSpec
    from swebench.harness.log_parsers import PARSER_REGISTRY

    require(shutil.which("npm") is not None, "npm is not installed here: it fetches the dependencies")
    repo = tmp_path / "durations"
    shutil.copytree(Path(__file__).parent / "data" / "js_project", repo)
    tag = JS.build_image(repo, "harness-test/js-durations:1")
    command = JS.test_command(repo, ["test/seconds.test.js"])
    with docker_backend.create(SandboxSpec(image=tag, workdir="/testbed")) as sandbox:
        assert sandbox.exec("test -d node_modules/ms && ! test -e /opt/npm-cache", timeout=60).ok
        run = sandbox.exec(command, timeout=300)
    statuses = PARSER_REGISTRY[JS.log_parser_for(repo)](run.output, None)
    assert run.ok and statuses == {"- seconds of hours": "PASSED", "- seconds of seconds": "PASSED"}, run.output


def test_an_install_script_that_fails_in_the_image_is_the_reason(docker_backend, tmp_path):
    """`npm ci` runs the project's lifecycle scripts in the image (husky's `prepare` wants a .git there): one that
    fails makes the project unbuildable with npm's error, not a failed run."""
    import shutil

    from sandboxes import SandboxSpec

    require(shutil.which("npm") is not None, "npm is not installed here: it fetches the dependencies")
    lock = {"name": "p", "version": "1.0.0", "lockfileVersion": 3, "requires": True, "packages": {"": {"name": "p"}}}
    repo = _project(
        tmp_path / "p",
        {"prepare": "echo preparing && exit 3"},
        {"package-lock.json": json.dumps(lock)},
        version="1.0.0",
    )
    with pytest.raises(ProjectError) as err:
        JS.build_image(repo, "harness-test/js-failing-prepare:1")
    assert str(err.value) == (
        "the install step (npm ci) failed: code 3 path /testbed command failed command sh -c echo preparing && exit 3"
    )
    # Install scripts run in a git work tree (husky's `prepare` needs one), which the image does not keep.
    (repo / "package.json").write_text(
        json.dumps({"name": "p", "version": "1.0.0", "scripts": {"prepare": "git status"}})
    )
    JS.build_image(repo, "harness-test/js-git-prepare:1")
    with docker_backend.create(SandboxSpec(image="harness-test/js-git-prepare:1", workdir="/testbed")) as sandbox:
        assert sandbox.exec("test -f package.json && ! test -e .git", timeout=60).ok
