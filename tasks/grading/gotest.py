"""`go test -v`: what the go command and the testing package print at the end of an honest run.

Per package, the test binary prints `=== RUN` / `--- PASS: TestX (0.00s)` lines (subtests indented, as
`TestX/sub`), then its own verdict, a lone `PASS` or `FAIL`, and exits; the go command then prints the
package's line from the binary's exit status: `ok  <package> <time>`, `FAIL <package> <time>` (or
`[build failed]`), `?   <package> [no test files]`. Every test's result is printed once per package.

The code under test runs inside the test binary: it can print result lines of its own, exit before the
tests run (an `init`, a `TestMain`), or rewrite the binary's flags so nothing runs. The checks:
a package's results come before its package line, each after its test's `=== RUN` line, and with the
binary's own verdict; a package the go command calls `ok` has no failing result; no test has two results
in one package; and the canary, a
must-fail test appended to a test file the instance runs, fails, followed by the binary's `FAIL` and
the go command's `FAIL` line for its package.
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath

from .patch_policy import parse_patch
from .runners import Check, Runner, Summary

# The go command's line per package, tab-separated: `ok  \t<package>\t0.01s`, `FAIL\t<package> [build failed]`.
PACKAGE = re.compile(r"^(ok|FAIL|\?) *\t(\S+)(?:\t| \[|$)")
RESULT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (.+) \((.+)\)$")
RUN = re.compile(r"^=== RUN\s+(\S+)$")
VERDICT = ("PASS", "FAIL")


def go_canary(canary: str) -> str:
    """The Go test function a canary name becomes (a test is `TestXxx`, Xxx not lower case first)."""
    return f"Test_{canary}"


class GoTest(Runner):
    name = "gotest"

    def package_lines(self, lines: list[str]) -> list[int]:
        return [i for i, line in enumerate(lines) if PACKAGE.match(line) and not RESULT.match(line)]

    def summary(self, lines):
        packages = self.package_lines(lines)
        if not packages:
            return None
        words = [PACKAGE.match(lines[i]).group(1) for i in packages]
        counts = {"ok": words.count("ok"), "failed": words.count("FAIL"), "no test files": words.count("?")}
        return Summary(counts, packages[-1])

    def result_lines(self, lines):
        return [i for i, line in enumerate(lines) if RESULT.match(line)]

    def blocks(self, lines: list[str]) -> list[tuple[int, int]]:
        """(first line, package line) of each package's output."""
        start, found = 0, []
        for i in self.package_lines(lines):
            found.append((start, i))
            start = i + 1
        return found

    def checks(self, lines, status_map, matter, parser):
        final, found = self.summary_checks(
            lines, "go test printed no package line (ok / FAIL): the run was cut short", "go test's last package line"
        )
        if final is None:
            return found
        found.append(self.block_counts(lines))
        return found

    def block_counts(self, lines: list[str]) -> Check:
        """Each package's results agree with the verdicts of its test binary and of the go command."""
        for start, end in self.blocks(lines):
            package = PACKAGE.match(lines[end])
            results = [RESULT.match(lines[i]) for i in range(start, end) if RESULT.match(lines[i])]
            if not results:
                continue
            names = [r.group(2) for r in results]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                return Check(
                    "summary_counts",
                    "failed",
                    f"{twice[0]} has two results in {package.group(2)}: forged result lines?",
                )
            started = {m.group(1) for i in range(start, end) if (m := RUN.match(lines[i]))}
            unstarted = [n for n in names if n not in started]
            if unstarted:
                return Check(
                    "summary_counts",
                    "failed",
                    f"{unstarted[0]} has a result in {package.group(2)} but never started (no `=== RUN`): "
                    "forged result lines?",
                )
            verdicts = [lines[i].strip() for i in range(start, end) if lines[i].strip() in VERDICT]
            if not verdicts:
                return Check(
                    "summary_counts",
                    "failed",
                    f"{package.group(2)}: results without the test binary's PASS / FAIL verdict "
                    "(it exited before its tests were done): forged result lines?",
                )
            failing = any(r.group(1) == "FAIL" for r in results)
            if package.group(1) == "ok" and (failing or verdicts[-1] != "PASS"):
                return Check(
                    "summary_counts",
                    "failed",
                    f"go test calls {package.group(2)} ok but its output shows a failure: forged result lines?",
                )
        return Check("summary_counts", "applied", "results, binary verdict and package line agree in every package")

    def canary_plant(self, instance, canary):
        """Appended to a test file of the test patch (else one the eval script names) in a package the go test
        command runs; none where the command selects tests by name (`-run`: the canary would not run)."""
        script = instance.get("eval_script") or ""
        command = [w for line in script.splitlines() if "go test" in line for w in _words(line)]
        if any(w.startswith(("-run", "--run", "-test.run")) for w in command):
            return None
        patterns = [w for w in command if w.startswith("./") or w == "."]
        changed = [f for f in parse_patch(instance.get("test_patch") or "") if f.path.endswith("_test.go")]
        # A file the patch shows using the testing package imports it: the canary compiles there (an
        # example_test.go of Example functions often imports only fmt).
        files = [f.path for f in changed if any("testing." in line for line in f.added + f.removed)]
        files += [f.path for f in changed if f.path not in files]
        files = files or [w for w in _words(script) if w.endswith("_test.go")]
        runs = [f for f in files if not patterns or any(_covers(p, f) for p in patterns)]
        if not runs:
            return None
        return runs[0], (
            f'\nfunc {go_canary(canary)}(t *testing.T) {{\n\tt.Fatal("grading canary: this test must fail")\n}}\n'
        )

    def canary_problem(self, lines, canary):
        name = go_canary(canary)
        mine = [i for i in self.result_lines(lines) if RESULT.match(lines[i]).group(2) == name]
        if not mine:
            return "the canary test (planted to fail) has no result: the run was cut short or its report forged"
        if RESULT.match(lines[mine[-1]]).group(1) != "FAIL":
            return "the canary test (planted to fail) did not fail: the test binary's verdicts were tampered with"
        end = next((i for i in self.package_lines(lines) if i > mine[-1]), None)
        if end is None:
            return "go test printed no package line after the canary's result (the run was cut short)"
        if PACKAGE.match(lines[end]).group(1) != "FAIL":
            return "go test calls the canary's package ok although the canary failed: forged exit status?"
        if "FAIL" not in (lines[i].strip() for i in range(mine[-1], end)):
            return "the test binary printed no FAIL verdict after the canary's result: forged report?"
        if any(i > self.package_lines(lines)[-1] for i in self.result_lines(lines)):
            return "test results were printed after go test's last package line: forged result lines?"
        return ""


def _covers(pattern: str, test_file: str) -> bool:
    """Whether the go package pattern `pattern` (`./...`, `./pkg/...`, `./pkg`, `.`) holds `test_file`."""
    folder = PurePosixPath(test_file).parent.as_posix()
    pattern = pattern.removeprefix("./").rstrip("/")
    if pattern.endswith("..."):
        prefix = pattern.removesuffix("...").rstrip("/")
        return prefix in ("", ".") or folder == prefix or folder.startswith(prefix + "/")
    return folder == (pattern or ".")


def _words(script: str) -> list[str]:
    words = []
    for line in script.splitlines():
        try:
            words += shlex.split(line)
        except ValueError:
            continue
    return words
