"""`cargo test`'s output, and the trust checks built on it (registered for swebench's parse_log_cargo).

cargo runs one test binary per target (the library's unit tests, each file of `tests/`, the doc tests);
libtest prints, for each:

    running 3 tests
    test tests::adds ... ok
    test tests::bad ... FAILED
    failures:                        (captured output of the failed tests, then their names)
    test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.21s

A binary that announced `running N tests` and printed no `test result:` ended behind the runner's back
(`std::process::exit` in the code under test, a crash): the log is not trusted. Within a binary, libtest
reports each test once, so a test named twice was forged (by code writing to the process's stdout, which
libtest does not capture, after the real result or before it); the result lines before its `failures:`
section may not outnumber its `running N` and its counts. They may fall short: run one at a time (a sandbox
with one CPU), a test's uncaptured output lands between `test x ... ` and its `ok`. A result line outside
every binary's block, or after the last summary, was not printed by libtest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from .patch_policy import parse_patch
from .runners import Check, Runner, Summary, _verdicts_from

RUNNING = re.compile(r"^running (\d+) tests?$")
# libtest names a test by its Rust path (`tests::adds`, ` - should panic` after it) or, for a doc test, by
# its file, item and line (`src/lib.rs - Ring::mean (line 3)`); `test tests/ui/x.rs ... ok` lines of tools
# that tests run (trybuild) are not its own. A line that holds " ... " twice is two run together.
NAME = r"[\w:#]+(?: - should panic)?|\S+\.rs - (?:(?! \.\.\. ).)*\(line \d+\)(?: - [\w ]+)?"
RESULT = re.compile(rf"^test ({NAME}) \.\.\. (ok|FAILED|ignored(?:, .*)?)$")
SUMMARY = re.compile(
    r"^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured; (\d+) filtered out"
)
OUTCOME = {"ok": "passed", "FAILED": "failed"}


@dataclass
class Block:
    """One test binary's report: `running N tests` at `start`, its summary at `end` (None: it never came)."""

    start: int
    announced: int
    end: int | None = None
    counts: dict[str, int] | None = None
    failures_at: int | None = None  # where its `failures:` section begins: captured output follows


def blocks(lines: list[str]) -> list[Block]:
    found: list[Block] = []
    for i, line in enumerate(lines):
        text = line.strip()
        if match := RUNNING.match(text):
            found.append(Block(i, int(match.group(1))))
        elif found and found[-1].end is None:
            if text == "failures:" and found[-1].failures_at is None:
                found[-1].failures_at = i
            elif match := SUMMARY.match(text):
                passed, failed, ignored, measured, filtered = (int(n) for n in match.groups()[1:])
                found[-1].end = i
                found[-1].counts = {"passed": passed, "failed": failed, "ignored": ignored, "measured": measured}
    return found


def _results_end(block: Block) -> int:
    """Where `block`'s result lines end: at its failures section (captured output follows) or its summary."""
    return block.failures_at if block.failures_at is not None else block.end


def _own_results(lines: list[str], block: Block) -> list[int]:
    """The result lines libtest printed for `block`."""
    return [i for i in range(block.start + 1, _results_end(block)) if RESULT.match(lines[i].strip())]


class CargoTest(Runner):
    name = "cargo"

    def summary(self, lines):
        """The counts of every binary's `test result:` together, at the last one."""
        done = [b for b in blocks(lines) if b.counts is not None]
        if not done:
            return None
        counts = {k: sum(b.counts[k] for b in done) for k in ("passed", "failed", "ignored", "measured")}
        return Summary(counts, done[-1].end)

    def result_lines(self, lines):
        return [i for i, line in enumerate(lines) if RESULT.match(line.strip())]

    def no_results(self, lines):
        from ..languages.rust import RUST

        return RUST.build_problem("\n".join(lines))

    def checks(self, lines, status_map, matter, parser):
        found_blocks = blocks(lines)
        final = self.summary(lines)
        if final is None:
            why = self.no_results(lines) or "cargo test printed no `test result:` line (the run was cut short)"
            return [Check("final_summary", "failed", why)]
        cut = [b for b in found_blocks if b.end is None]
        found = [
            Check(
                "final_summary",
                "failed" if cut else "applied",
                f"a test binary announced `running {cut[0].announced} tests` and never printed its `test result:` "
                "(it exited behind the runner's back or crashed)"
                if cut
                else f"line {final.line}",
            )
        ]
        inside = {i for b in found_blocks if b.end is not None for i in range(b.start, b.end + 1)}
        stray = [i for i in self.result_lines(lines) if i not in inside]
        found.append(
            Check(
                "results_after_summary",
                "failed" if stray else "applied",
                f"a test result was printed outside every test binary's report (line {stray[0]}): forged result line?"
                if stray
                else "",
            )
        )
        found.append(self._counts(lines, found_blocks))
        # What each binary printed before its failures section: not the captured output of failed tests.
        own = [line for b in found_blocks if b.end is not None for line in lines[b.start + 1 : _results_end(b)]]
        found.append(_verdicts_from(own, status_map, matter, parser, "libtest's own result lines"))
        return found

    def _counts(self, lines, found_blocks) -> Check:
        for block in found_blocks:
            if block.end is None:
                continue
            tally = {"passed": 0, "failed": 0, "ignored": 0}
            seen: set[str] = set()
            for i in _own_results(lines, block):
                name, outcome = RESULT.match(lines[i].strip()).groups()
                if name in seen:
                    return Check(
                        "summary_counts",
                        "failed",
                        f"{name} is reported twice by one test binary (line {i}): forged result line?",
                    )
                seen.add(name)
                tally[OUTCOME.get(outcome, "ignored")] += 1
            counted = {k: block.counts[k] for k in tally}
            if any(tally[k] > counted[k] for k in tally) or sum(tally.values()) > block.announced:
                return Check(
                    "summary_counts",
                    "failed",
                    f"a test binary's result lines {tally} outnumber its `running {block.announced} tests` "
                    f"and `test result:` {counted}: forged result lines?",
                )
        return Check("summary_counts", "applied")

    def canary_plant(self, instance, canary):
        """A `#[test]` that panics, appended to a test file of the test patch: an integration test file
        (`tests/x.rs`, its own binary: the canary is the top-level test `canary`) first, else a unit-test
        module file (`src/tests.rs`: the canary is `tests::canary`). Appending keeps the file's own items
        and imports; a test module declared inline in a source file is not a file we may append to."""
        from ..languages.rust import RUST

        files = [f.path for f in parse_patch(instance.get("test_patch") or "") if RUST.is_test_path(f.path)]
        files = [f for f in files if not f.endswith("/mod.rs") and PurePosixPath(f).parts[0] != "benches"]
        files.sort(key=lambda f: not (len(PurePosixPath(f).parts) == 2 and f.startswith("tests/")))
        if not files:
            return None
        return files[0], f'\n#[test]\nfn {canary}() {{\n    panic!("grading canary: this test must fail");\n}}\n'

    def canary_problem(self, lines, canary):
        """Only libtest can print the canary's result, inside the binary that runs it, and that binary's
        summary must count its failure; a runner made to pass everything passes the canary too."""
        mine = [
            i
            for i in self.result_lines(lines)
            if re.fullmatch(rf"(?:\S+::)?{canary}", RESULT.match(lines[i].strip()).group(1))
        ]
        if not mine:
            return "the canary test (planted to fail) has no result: the run was cut short or its report forged"
        if any(RESULT.match(lines[i].strip()).group(2) != "FAILED" for i in mine):
            return "the canary test (planted to fail) did not fail: the runner's verdicts were tampered with"
        block = next((b for b in blocks(lines) if b.start < mine[0] and (b.end is None or mine[0] < b.end)), None)
        if block is None or block.end is None:
            return "the test binary that ran the canary printed no `test result:` after it (the run was cut short)"
        if not block.counts["failed"]:
            return "the canary's test binary counts no failure although the canary failed: forged summary?"
        return ""
