"""Rust (`tasks.languages.rust`): detection, the cargo test command, what the patch review calls a Rust
test or runner setting, and the cargo runner's trust checks on real logs.

The logs in data/cargo/ are real: Debian trixie's cargo 1.85 in the Rust base image ran swe-demo-rust's
slugkit__slugkit-1 through grading's own eval script with the canary below planted, on the base commit
(`base_canary`), with the gold patch (`gold_canary`) and with a patch whose code under test calls
`std::process::exit(0)` (`exit_under_test`); ringstat__ringstat-1 with gold (`unit_gold_canary`, the tests
in a unit-test module). Forgeries are made by editing those logs the way code under test could.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.grading.grade import canary_plant, judge_log
from tasks.grading.patch_policy import is_test_path, review_patch
from tasks.languages import detect_language, language_named, language_of
from tasks.languages.rust import DEBIAN_REGISTRY, cargo_targets, crate_packages

DATA = Path(__file__).parent / "data" / "cargo"
CANARY = "test_0123456789abcdef"
RUST = language_named("rust")
SLUG = {
    "instance_id": "slugkit__slugkit-1",
    "repo": "harness-demo/slugkit",
    "version": "0.1",
    "image": "i",
    "eval_script": "",
    "log_parser": "parse_log_cargo",
    "eval_type": "pass_and_fail",
    "FAIL_TO_PASS": ["no_trailing_separator", "trailing_symbols_are_dropped"],
    "PASS_TO_PASS": ["drops_punctuation", "empty_text_is_an_empty_slug", "keeps_digits", "short_text_is_kept"],
    "test_patch": "diff --git a/tests/slug.rs b/tests/slug.rs\n--- a/tests/slug.rs\n+++ b/tests/slug.rs\n@@ -1 +1 @@\n-x\n+y\n",
}


def log(name: str) -> str:
    return (DATA / f"{name}.log").read_text()


def judged(text: str, canary: str = CANARY, instance: dict = SLUG):
    return judge_log(instance, text, canary)


def diff(path: str, added: list[str], removed: tuple[str, ...] = ("old",)) -> str:
    body = "".join(f"-{line}\n" for line in removed) + "".join(f"+{line}\n" for line in added)
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,{len(removed)} +1,{len(added)} @@\n{body}"


# ------------------------------------------------------------------ detection and the command
def test_a_crate_is_rust_and_its_instances_are_known_by_parser(tmp_path):
    (tmp_path / "Cargo.toml").write_text('[package]\nname = "x"\n')
    assert detect_language(tmp_path) is RUST
    (tmp_path / "Cargo.toml").unlink()
    (tmp_path / "pyproject.toml").write_text("")
    assert detect_language(tmp_path).name == "python"
    assert language_of({"log_parser": "parse_log_cargo"}) is RUST
    assert language_named("rs") is RUST and RUST.title == "Rust"
    assert {"rustc", "cargo"} <= set(RUST.base_recipe()["packages"])


def test_cargo_test_runs_offline_from_debians_registry(monkeypatch):
    monkeypatch.delenv("HARNESS_CARGO_SOURCE", raising=False)
    command = RUST.test_command()
    assert "cargo --config 'source.crates-io.replace-with=\"debian\"'" in command
    assert f'source.debian.directory="{DEBIAN_REGISTRY}"' in command
    assert command.endswith("test --no-fail-fast --offline")
    assert "CARGO_TARGET_DIR=/tmp/" in command and "CARGO_HOME=/tmp/" in command
    monkeypatch.setenv("HARNESS_CARGO_SOURCE", "crates-io")
    assert "--offline" not in RUST.test_command() and "replace-with" not in RUST.test_command()
    monkeypatch.setenv("HARNESS_CARGO_SOURCE", "vendored")
    with pytest.raises(ValueError, match="HARNESS_CARGO_SOURCE='vendored'"):
        RUST.test_command()


def test_named_test_files_become_cargo_targets():
    assert cargo_targets(["tests/slug.rs", "tests/slug.rs"]) == ["--test", "slug"]
    assert cargo_targets(["tests/cli/main.rs", "tests/common/mod.rs"]) == ["--test", "cli", "--tests"]
    assert cargo_targets(["src/tests.rs", "src/parse/mod.rs"]) == ["--lib"]
    assert cargo_targets(["benches/speed.rs", "src/main.rs"]) == ["--bench", "speed", "--bins"]
    assert cargo_targets(["tests/slug.rs", "tests::adds"]) == ["--test", "slug", "--", "tests::adds"]
    assert RUST.test_command(tests=["src/tests.rs"]).endswith("--offline --lib")


def test_a_crates_dependencies_name_the_debian_packages_of_the_offline_registry(tmp_path):
    (tmp_path / "Cargo.toml").write_text(
        '[package]\nname = "x"\n\n[dependencies]\nitoa = "1"\nserde_json = { version = "1", optional = true }\n'
        'core = { path = "core" }\nrx = { package = "regex", version = "1" }\n\n[dev-dependencies]\nproptest = "1"\n\n'
        "[target.'cfg(unix)'.build-dependencies]\ncc = \"1\"\n"
    )
    assert crate_packages(tmp_path) == [
        "librust-cc-dev", "librust-itoa-dev", "librust-proptest-dev", "librust-regex-dev", "librust-serde-json-dev",
    ]  # fmt: skip


def test_a_workspaces_members_and_workspace_dependencies_name_packages_too(tmp_path):
    """A virtual manifest (tokio's, `[workspace]` alone) depends on nothing itself: its members do."""
    (tmp_path / "Cargo.toml").write_text(
        '[workspace]\nmembers = [".", "crates/*", "cli"]\nexclude = ["crates/old"]\n\n'
        '[workspace.dependencies]\nmemchr = "2"\ncore = { path = "crates/core" }\n'
    )
    manifests = {
        "crates/core": '[package]\nname = "core"\n[dependencies]\nlibc = "0.2"\nmemchr = { workspace = true }\n',
        "crates/old": '[package]\nname = "old"\n[dependencies]\nnot_in_debian = "1"\n',
        "cli": '[package]\nname = "cli"\n[dependencies]\ncore = { workspace = true }\n[dev-dependencies]\ntempfile = "3"\n',
    }
    for member, text in manifests.items():
        (tmp_path / member).mkdir(parents=True)
        (tmp_path / member / "Cargo.toml").write_text(text)
    assert crate_packages(tmp_path) == ["librust-libc-dev", "librust-memchr-dev", "librust-tempfile-dev"]


# ------------------------------------------------------------------ the patch review
def test_a_crates_tests_benches_and_unit_test_modules_are_tests():
    for path in ("tests/slug.rs", "crates/core/tests/it.rs", "benches/speed.rs", "src/tests.rs", "src/parse/test.rs"):
        assert RUST.is_test_path(path) and is_test_path(path), path
    for path in ("src/lib.rs", "src/testing_utils.rs", "benches/README.md", "build.rs"):
        assert not RUST.is_test_path(path), path
    assert RUST.is_test_config(".cargo/config.toml") and not RUST.is_test_config("config.toml")


def test_cargo_toml_runner_settings_are_neutralized_hunk_wise_and_refused_in_the_refuse_mode():
    harness_off = diff("Cargo.toml", ["[[test]]", 'name = "slug"', "harness = false"], removed=())
    review = review_patch(harness_off, SLUG)
    assert review.neutralized == {"Cargo.toml": "test-runner settings in Cargo.toml (restored from the base commit)"}
    assert "grading mode refuse" in review_patch(harness_off, SLUG, grading_mode="refuse").refused[0]
    assert not review_patch(diff("Cargo.toml", ['version = "0.2.0"']), SLUG).neutralized
    profile = diff("Cargo.toml", ["[profile.test]", "opt-level = 3"], removed=())
    assert "Cargo.toml" in review_patch(profile, SLUG).neutralized
    config = review_patch(diff(".cargo/config.toml", ["[target.x86_64-unknown-linux-gnu]", 'runner = "true"']), SLUG)
    assert ".cargo/config.toml" in config.neutralized


def test_build_scripts_that_write_or_run_are_refused_and_cfg_test_stubs_too():
    writes = review_patch(diff("build.rs", ['    std::fs::write("tests/slug.rs", "").unwrap();']), SLUG)
    assert writes.refused == [
        "build.rs: build script that writes files or runs programs (it runs before the tests and can rewrite them)"
    ]
    assert not review_patch(diff("build.rs", ['    println!("cargo:rustc-cfg=has_simd");']), SLUG).refused
    assert review_patch(diff("Cargo.toml", ['build = "gen.rs"']), SLUG).refused
    stub = ["#[cfg(test)]", "pub fn mean(&self) -> Option<f64> {", "    None", "}"]
    assert "#[cfg(test)] stub" in review_patch(diff("src/lib.rs", stub), SLUG).refused[0]
    for cheat in (
        ["#[cfg(not(test))]"],
        ["    if cfg!(test) { return None; }"],
        ["#[cfg(any(test, fuzzing))]", "fn f() {}"],
    ):
        assert review_patch(diff("src/lib.rs", cheat), SLUG).refused, cheat
    honest = ["#[cfg(test)]", "mod tests;", "#[cfg(test)]", "use std::collections::HashMap;", "// #[cfg(test)] x"]
    assert not review_patch(diff("src/lib.rs", honest), SLUG).refused


# ------------------------------------------------------------------ the runner on real logs
def test_real_logs_are_trusted_and_graded_as_swebench_reads_them():
    gold = judged(log("gold_canary"))
    assert gold.problem == "" and "canary: applied" in gold.checks
    assert all(gold.statuses[t] == "PASSED" for t in SLUG["FAIL_TO_PASS"] + SLUG["PASS_TO_PASS"])
    assert not any(CANARY in t for t in gold.statuses)
    base = judged(log("base_canary"))
    assert base.problem == "" and base.statuses["no_trailing_separator"] == "FAILED"
    ring = {**SLUG, "FAIL_TO_PASS": ["tests::full_ring_drops_the_oldest"], "PASS_TO_PASS": ["tests::max_of_samples"]}
    unit = judged(log("unit_gold_canary"), instance=ring)
    assert unit.problem == "" and unit.statuses["tests::full_ring_drops_the_oldest"] == "PASSED"


def test_a_binary_that_exits_behind_the_runner_is_not_trusted():
    cut = judged(log("exit_under_test"))
    assert "never printed its `test result:`" in cut.problem
    assert any(c.startswith("canary: failed") for c in cut.checks)


def test_forged_result_lines_are_caught():
    gold, base = log("gold_canary"), log("base_canary")
    after = base.replace("+ SWEBENCH_TEST_EXIT_CODE", "test no_trailing_separator ... ok\n+ SWEBENCH_TEST_EXIT_CODE", 1)
    assert "outside every test binary's report" in judged(after).problem
    extra = base.replace("test keeps_digits ... ok", "test keeps_digits ... ok\ntest hidden_fix ... ok", 1)
    assert "outnumber its `running 7 tests`" in judged(extra).problem
    # Written past libtest's capture by a test that runs after the real result, in place of its own line.
    twice = base.replace(
        "test trailing_symbols_are_dropped ... FAILED",
        "test trailing_symbols_are_dropped ... FAILED\ntest zz_flush ... \ntest no_trailing_separator ... ok\nok",
        1,
    )
    assert "no_trailing_separator is reported twice by one test binary" in judged(twice).problem
    # Uncaptured output of an honest test run one at a time hides its result line: not held against the log.
    leaked = base.replace("test keeps_digits ... ok", "test keeps_digits ... hello from the CLI\nok", 1)
    assert judged(leaked).problem == ""
    # trybuild, run by a test, prints its own `test <file> ... ok` lines: not libtest's, not counted.
    trybuild = base.replace("test keeps_digits ... ok", "test keeps_digits ... ok\ntest tests/ui/bad.rs ... ok", 1)
    assert judged(trybuild).problem == ""
    assert judged(trybuild, instance={**SLUG, "PASS_TO_PASS": ["tests/ui/bad.rs"]}).problem == ""
    captured = base.replace('  left: "hello-world-"', "test no_trailing_separator ... ok", 1)
    forged = judged(captured)
    assert forged.statuses["no_trailing_separator"] == "PASSED"  # what swebench's parser alone reads
    assert "libtest's own result lines does not say so" in forged.problem
    # A runner made to pass everything: the canary's line, its binary's summary and the exit status agree.
    passed_canary = gold.replace(f"test {CANARY} ... FAILED", f"test {CANARY} ... ok", 1)
    passed_canary = passed_canary.replace("FAILED. 6 passed; 1 failed", "ok. 7 passed; 0 failed").replace("101", "0")
    assert "did not fail" in judged(passed_canary).problem
    assert "has no result" in judged(gold.replace(CANARY, "test_x")).problem


def test_a_crate_whose_dependencies_cannot_be_had_is_unbuildable_with_the_reason():
    text = (
        "+ : '>>>>> Start Test Output'\nerror: no matching package named `serde` found\n"
        "location searched: directory source `/usr/share/cargo/registry` (which is replacing registry `crates-io`)\n"
        "required by package `x v0.1.0 (/testbed)`\n+ : '>>>>> End Test Output'\n"
        "test never_ran ... ok\n"  # no test result: the parser's lines alone must not be trusted
    )
    problem = judged(text, canary="").problem
    assert "unbuildable: the crate `serde` is not in the offline registry" in problem
    # No result line at all: cargo's own reason, a Cargo.lock pin the registry lacks, is the log's verdict.
    locked = (
        "+ : '>>>>> Start Test Output'\nerror: failed to select a version for the requirement "
        '`aho-corasick = "^1.1.1"` (locked to 1.1.4)\ncandidate versions found which didn\'t match: 1.1.3\n'
        "location searched: directory source `/usr/share/cargo/registry` (which is replacing registry `crates-io`)\n"
        "+ : '>>>>> End Test Output'\n"
    )
    assert judged(locked, canary="").problem.startswith(
        'unbuildable: no version of `aho-corasick = "^1.1.1"` (locked to 1.1.4) in the offline registry '
        "(/usr/share/cargo/registry, which has 1.1.3)"
    )
    assert 'could not compile `x` (test "slug")' in RUST.build_problem(
        'error: could not compile `x` (test "slug") due to 1 previous error'
    )


def test_the_canary_goes_into_an_integration_test_file_else_a_unit_test_module():
    path, text = canary_plant(SLUG, CANARY)
    assert path == "tests/slug.rs" and f"#[test]\nfn {CANARY}() {{" in text and "panic!" in text
    unit = {**SLUG, "test_patch": diff("src/tests.rs", ["x"]) + diff("tests/common/mod.rs", ["y"])}
    assert canary_plant(unit, CANARY)[0] == "src/tests.rs"
    assert canary_plant({**SLUG, "test_patch": diff("tests/common/mod.rs", ["y"])}, CANARY) is None
