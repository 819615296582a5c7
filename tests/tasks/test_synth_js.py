"""Synthetic tasks in JavaScript/TypeScript: mutations on tree-sitter's syntax tree, then the pipeline on a
real npm package (minimist 1.2.8, fetched from the npm registry with its tape suite), graded with gold and
empty patches."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap

import pytest

from tasks.languages import language_named
from tasks.synth import SynthError, synthesize
from tasks.synth.js_mutations import compiles, file_mutations, find_mutations
from tasks.synth.source import NPM_SPEC
from tasks.synth.targets import target_for
from tests.conftest import require

JS = language_named("javascript")

SAMPLE = textwrap.dedent("""\
    export class Range {
      constructor(private low: number, private high: number) {}

      contains(value: number): boolean {
        if (value < this.low || value > this.high) {
          return false;
        }
        return !Number.isNaN(value);
      }
    }

    export const pick = <T,>(items: T[], first: boolean): T => (first ? items[0] : items[items.length - 1]);
    const greeting = (name: string) => "hi " + name;
""")


def _edits(source: str, path: str = "src/range.ts") -> dict[str, list[str]]:
    data = source.encode()
    found: dict[str, list[str]] = {}
    for mutation in file_mutations(data, path):
        found.setdefault(mutation.kind, []).append(mutation.apply(data).decode())
    return found


def test_each_kind_edits_only_its_node_in_typescript():
    edits = _edits(SAMPLE)
    assert set(edits) == {
        "flip_comparison",
        "flip_boolean",
        "flip_arithmetic",
        "off_by_one",
        "remove_negation",
        "negate_condition",
        "swap_ternary",
        "swap_return",
    }
    assert SAMPLE.replace("value < this.low", "value <= this.low") in edits["flip_comparison"]
    assert SAMPLE.replace("|| value >", "&& value >") in edits["flip_boolean"]
    assert SAMPLE.replace("items.length - 1", "items.length + 1") in edits["flip_arithmetic"]
    assert SAMPLE.replace("items.length - 1", "items.length - 2") in edits["off_by_one"]
    assert SAMPLE.replace("items[0]", "items[1]") in edits["off_by_one"]
    assert SAMPLE.replace("return !Number.isNaN(value)", "return Number.isNaN(value)") in edits["remove_negation"]
    assert SAMPLE.replace("return false;", "return true;") in edits["swap_return"]
    assert (
        SAMPLE.replace("items[0] : items[items.length - 1]", "items[items.length - 1] : items[0]")
        in edits["swap_ternary"]
    )
    # String concatenation is no arithmetic, and type annotations (`T[]`, `: number`) are never touched.
    assert not any('"hi " - name' in e for e in edits["flip_arithmetic"])
    assert all(e.count(": number") == SAMPLE.count(": number") for kind in edits.values() for e in kind)
    assert all(compiles(e.encode(), "src/range.ts") for kind in edits.values() for e in kind)


def test_broken_files_are_detected_and_tests_and_dependencies_are_not_mutated(tmp_path):
    assert not compiles(b"if (a { return 1 }", "a.js") and compiles(b"const a = <div>{b}</div>;", "a.jsx")
    assert file_mutations(b"function f( {", "a.js") == []
    for name in (
        "src/a.js",
        "src/a.test.js",
        "test/b.js",
        "node_modules/x/index.js",
        "dist/a.min.js",
        "jest.config.js",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("function f(a) { return a < 1; }\n")
    assert {m.path for m in find_mutations(tmp_path)} == {"src/a.js"}


def test_npm_specs_and_the_language_registry(tmp_path):
    assert all(NPM_SPEC.match(s) for s in ("minimist@1.2.8", "@scope/name@^2.0.0", "npm:left-pad"))
    assert not any(NPM_SPEC.match(s) for s in ("requests==2.31", "six", "pkg @ https://x/y.tar.gz"))
    (tmp_path / "go.mod").write_text("module x\n")
    with pytest.raises(SynthError, match="is a Go project; bugs are synthesized in Python, JavaScript/TypeScript"):
        target_for(tmp_path)


def test_runner_through_npm_run_without_a_lint_pretest_and_tape_results_named_by_their_test(tmp_path):
    scripts = {"pretest": "npm run lint", "test": "npm run tests-only", "tests-only": "nyc tape 'test/*.js'"}
    (tmp_path / "package.json").write_text(json.dumps({"name": "p", "scripts": scripts}))
    command = JS.test_command(tmp_path, ["test/a.js"])
    assert command.startswith("./node_modules/.bin/tape test/a.js | awk ") and "lint" not in command
    tap = "# parse\nok 1 should be equal\nnot ok 2 should be equal\n# other\nok 3 should be equal\n# pass  2\n"
    named = subprocess.run(command.split(" | ", 1)[1], shell=True, input=tap, capture_output=True, text=True).stdout
    assert named.splitlines() == [
        "# parse",
        "ok 1 parse > should be equal",
        "not ok 2 parse > should be equal #2",
        "# other",
        "ok 3 other > should be equal",
        "# pass  2",
    ]


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory, docker_backend):
    require(shutil.which("npm") is not None, "npm is not installed here: it fetches the package and its dependencies")
    output = tmp_path_factory.mktemp("out") / "minimist.jsonl"
    summary = synthesize("minimist@1.2.8", output, max_tasks=2, max_candidates=6, seed=0, backend=docker_backend)
    return output, summary


def test_an_npm_package_yields_valid_instances(synthesized):
    from tasks.taskset import load_tasks, validate_records

    output, summary = synthesized
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert summary.origin == "npm:minimist@1.2.8" and summary.baseline_passing == 153
    assert 1 <= len(records) == summary.kept <= 2
    assert summary.kept + summary.flaky + sum(summary.rejected.values()) == summary.decided <= 6
    assert validate_records(records) == []
    assert [t.id for t in load_tasks(str(output))] == [r["instance_id"] for r in records]
    for record in records:
        assert record["language"] == "javascript" and record["log_parser"] == "parse_log_tap"
        assert record["FAIL_TO_PASS"] and not set(record["FAIL_TO_PASS"]) & set(record["PASS_TO_PASS"])
        assert record["synth"]["file"] == "index.js" and "./node_modules/.bin/tape" in record["eval_script"]


def test_gold_resolves_each_npm_instance_and_the_empty_patch_does_not(synthesized, docker_backend):
    from tasks.grading.grade import grade

    output, _ = synthesized
    for record in (json.loads(line) for line in output.read_text().splitlines()):
        gold = grade(record, record["patch"], docker_backend)
        assert gold.resolved, (record["instance_id"], gold.to_dict())
        empty = grade(record, "", docker_backend)
        assert not empty.resolved and empty.tests_status["FAIL_TO_PASS"]["failure"]


def test_the_statement_shows_what_a_failed_tap_assertion_expected_but_not_the_stack():
    from tasks.synth.statement import failures

    log = textwrap.dedent("""\
        # parse a
        not ok 1 parse a > should be deeply equivalent
          ---
            operator: deepEqual
            expected: |-
              { a: 1 }
            actual: |-
              { a: 2 }
            at: Test.<anonymous> (/testbed/test/a.js:5:4)
            stack: |-
              Error: should be deeply equivalent
                  at parse (/testbed/index.js:3:4)
          ...
    """)
    found = failures(log, ["parse a > should be deeply equivalent"], hide="index.js")
    assert found[0]["details"] == ["operator: deepEqual", "expected: |-", "  { a: 1 }", "actual: |-", "  { a: 2 }"]
