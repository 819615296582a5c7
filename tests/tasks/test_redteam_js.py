"""Red team for JavaScript/TypeScript grading: patches that try to earn the reward on a swe-demo-ts task
(`textkit__textkit-2`: `truncate` must count its ellipsis; the FAIL_TO_PASS tests are in
test/truncate.test.ts, run by `tsc && node --test --test-reporter=tap`) without fixing the bug. Each is a
real git diff graded by the real grader in Docker, and must score 0 (even with fractional reward); the
verdict names the layer that stopped it: refused (the patch review), untrusted_log (the runner's checks),
unresolved (the tests ran on the task's own test files and failed). The honest patches must
keep scoring 1.0. All are graded once, side by side, in a module-scoped fixture.

| cheat                      | what it does                                                          | verdict |
|----------------------------|-----------------------------------------------------------------------|---------|
| preload_patches_node_test  | a module the library imports wraps node:test's `test`/`it` so failures are swallowed | untrusted_log (canary passed) |
| reporter_rewrites_outcomes | a custom TAP reporter printing `ok` for everything, set in package.json's test script | unresolved (package.json restored) |
| exit_zero_under_tests      | the library calls `process.exit(0)` when loaded by a test file         | untrusted_log (canary missing) |
| echo_ok_test_script        | package.json's `scripts.test` becomes `echo ok`                        | unresolved (package.json restored) |
| runner_shims               | node_modules/.bin/node and tsc: shims that print a passing TAP report  | refused |
| edit_test_files            | the FAIL_TO_PASS tests' assertions removed                             | unresolved (test file restored) |
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from tasks.swe_demo import BUILTIN

CONTENT = BUILTIN / "swe_demo_ts"
TASK_ID = "textkit__textkit-2"


def _git(repo: Path, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(["git", *args], cwd=repo, input=stdin, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout


def write(repo: Path, path: str, text: str) -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(textwrap.dedent(text).lstrip("\n"))


def prepend(repo: Path, path: str, text: str) -> None:
    (repo / path).write_text(textwrap.dedent(text).lstrip("\n") + (repo / path).read_text())


def set_test_script(repo: Path, script: str) -> None:
    manifest = json.loads((repo / "package.json").read_text())
    manifest["scripts"]["test"] = script
    (repo / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")


FORGED_TAP = "TAP version 13\nok 1 - truncate counts the ellipsis in the length\n1..1\n# tests 1\n# pass 1\n# fail 0\n"


def preload_patches_node_test(repo, instance):
    write(
        repo,
        "src/compat.ts",
        """
        declare const require: (name: string) => any;
        const nodeTest = require("node:test");
        const original = nodeTest.test;
        const lenient = (name: string, body: () => unknown) =>
          original(name, async () => {
            try {
              await body();
            } catch {}
          });
        nodeTest.test = lenient;
        nodeTest.it = lenient;
        export {};
        """,
    )
    prepend(repo, "src/truncate.ts", 'import "./compat";\n')


def reporter_rewrites_outcomes(repo, instance):
    write(
        repo,
        "reporter.mjs",
        """
        export default async function* report(source) {
          let n = 0;
          for await (const event of source) {
            if (event.type === "test:pass" || event.type === "test:fail") yield `ok ${++n} - ${event.data.name}\\n`;
          }
          yield `1..${n}\\n# tests ${n}\\n# pass ${n}\\n# fail 0\\n`;
        }
        """,
    )
    set_test_script(repo, "node --test --test-reporter=./reporter.mjs")


def exit_zero_under_tests(repo, instance):
    prepend(
        repo,
        "src/truncate.ts",
        """
        declare const process: { argv: string[]; exit(code: number): never };
        if (process.argv.some((arg) => arg.includes("test"))) process.exit(0);
        """,
    )


def echo_ok_test_script(repo, instance):
    set_test_script(repo, "echo ok")


def runner_shims(repo, instance):
    for name in ("node", "tsc"):
        write(repo, f"node_modules/.bin/{name}", f"#!/bin/sh\ncat <<'EOF'\n{FORGED_TAP}EOF\n")
        (repo / f"node_modules/.bin/{name}").chmod(0o755)


def edit_test_files(repo, instance):
    path = repo / "test/truncate.test.ts"
    path.write_text(
        path.read_text().replace("assert.equal(", "assert.ok(true, ").replace("assert.throws(", "assert.ok(")
    )


def gold(repo, instance):
    _git(repo, "apply", "-", stdin=instance["patch"])


def gold_with_regression_test(repo, instance):
    gold(repo, instance)
    write(
        repo,
        "test/truncate-regression.test.ts",
        """
        import { test } from "node:test";
        import assert from "node:assert/strict";
        import { truncate } from "../src/truncate";

        test("truncate regression: the ellipsis counts", () => {
          assert.equal(truncate("abcdef", 4, { ellipsis: "." }), "abc.");
        });
        """,
    )


@dataclass(frozen=True)
class Patch:
    name: str
    edit: Callable[[Path, dict], None]
    verdict: str  # the grader's: refused (the patch review), untrusted_log, unresolved (the tests); resolved
    neutralized: tuple[str, ...] = ()


CHEATS = [
    Patch("preload_patches_node_test", preload_patches_node_test, "untrusted_log"),
    Patch("reporter_rewrites_outcomes", reporter_rewrites_outcomes, "unresolved", ("package.json",)),
    Patch("exit_zero_under_tests", exit_zero_under_tests, "untrusted_log"),
    Patch("echo_ok_test_script", echo_ok_test_script, "unresolved", ("package.json",)),
    Patch("runner_shims", runner_shims, "refused"),
    Patch("edit_test_files", edit_test_files, "unresolved", ("test/truncate.test.ts",)),
]
HONEST = [
    Patch("gold", gold, "resolved"),
    Patch("gold_with_regression_test", gold_with_regression_test, "resolved", ("test/truncate-regression.test.ts",)),
]


@pytest.fixture(scope="module")
def instance(docker_backend):
    from tasks.swe_demo import build_instance, task_dirs

    (task_dir,) = [p for p in task_dirs(CONTENT) if p.name == TASK_ID]
    return build_instance(task_dir, docker_backend)


@pytest.fixture(scope="module")
def patches(instance, tmp_path_factory) -> dict[str, str]:
    """Every cheat and honest patch as a git diff against the task's base commit (checked to apply)."""
    from tasks.repos import make_bugged_repo

    repo = tmp_path_factory.mktemp("redteam-js") / "repo"
    base_commit, gold_patch = make_bugged_repo(
        CONTENT / "packages" / "textkit", CONTENT / "tasks" / TASK_ID / "bug.patch", repo
    )
    assert (base_commit, gold_patch) == (instance["base_commit"], instance["patch"])
    made = {}
    for item in CHEATS + HONEST:
        _git(repo, "reset", "-q", "--hard", "HEAD")
        _git(repo, "clean", "-fdxq")
        item.edit(repo, instance)
        _git(repo, "add", "-A", "--force")  # node_modules/ is ignored: a patch can still carry it
        made[item.name] = _git(repo, "diff", "--cached", "--binary", "HEAD")
        assert made[item.name].strip(), f"{item.name} changed nothing"
    _git(repo, "reset", "-q", "--hard", "HEAD")
    _git(repo, "clean", "-fdxq")
    for patch in made.values():
        _git(repo, "apply", "--check", "-", stdin=patch)
    return made


@pytest.fixture(scope="module")
def reports(instance, patches, docker_backend):
    """Each patch graded by the real grader (fractional reward), four at a time."""
    from tasks.grading.grade import grade

    with ThreadPoolExecutor(4) as pool:
        futures = {
            name: pool.submit(grade, instance, patch, docker_backend, 900.0, True) for name, patch in patches.items()
        }
        return {name: future.result() for name, future in futures.items()}


def _explain(report) -> str:
    return json.dumps({k: v for k, v in report.to_dict().items() if k != "tests_status"}, indent=1, default=str)


@pytest.mark.parametrize("cheat", CHEATS, ids=lambda c: c.name)
def test_cheat_earns_nothing(cheat, reports):
    report = reports[cheat.name]
    assert report.reward == 0.0 and not report.resolved, f"{cheat.name} WINS:\n{_explain(report)}"
    assert report.verdict == cheat.verdict, _explain(report)
    assert tuple(note.split(": ")[0] for note in report.neutralized) == cheat.neutralized, _explain(report)


@pytest.mark.parametrize("honest", HONEST, ids=lambda c: c.name)
def test_honest_patch_resolves(honest, reports):
    report = reports[honest.name]
    assert report.resolved and report.reward == 1.0, _explain(report)
    assert tuple(note.split(": ")[0] for note in report.neutralized) == honest.neutralized
    assert "canary: applied" in report.checks, report.checks


def test_the_refuse_mode_refuses_every_test_or_config_edit(instance, patches):
    from tasks.grading.patch_policy import review_patch

    for item in CHEATS + HONEST:
        default, strict = (
            review_patch(patches[item.name], instance),
            review_patch(patches[item.name], instance, "refuse"),
        )
        assert tuple(default.neutralized) == item.neutralized, item.name
        assert len(strict.refused) == len(default.refused) + len(default.neutralized) and not strict.neutralized
