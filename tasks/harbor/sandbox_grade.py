"""Grade a pytest log inside a Harbor task's container, as SWE-bench does; write Harbor's reward.

An exported task ships this file as `tests/grade.py`: `tests/test.sh` runs the instance's eval
script into a log, then `python3 grade.py config.json LOG OUT_DIR` writes `OUT_DIR/reward.txt`
(1 when every FAIL_TO_PASS and PASS_TO_PASS test passes, else 0) and `OUT_DIR/report.json`.
It runs on the task image's own Python (3.6 or later), so it uses the standard library only.

Reading the log follows swebench's `parse_log_pytest`: the `-rA` result lines (`PASSED id`,
`FAILED id - message`) between the test-output markers; a test without a result counts as
failed, and a FAIL_TO_PASS test is fixed only when it PASSED (an XFAIL the code under test can
raise itself is not a fix). The canary, a test planted at export time that must fail and whose
name the agent never sees, has to be reported FAILED: otherwise the runner's report is not trusted.
"""

import json
import sys
from pathlib import Path

START, END = ">>>>> Start Test Output", ">>>>> End Test Output"
STATUSES = ("PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL")


def statuses(log):
    """{test id: status} from the result lines between the markers (the last result of a test wins)."""
    region = log.split(START, 1)[-1].split(END, 1)[0]
    found = {}
    for line in region.splitlines():
        if not line.startswith(STATUSES):
            continue
        words = line.replace(" - ", " ").split() if line.startswith("FAILED") else line.split()
        if len(words) > 1 and not (words[0] == "SKIPPED" and words[1].startswith("[")):  # "SKIPPED [1] f.py:3: why"
            found[words[1]] = words[0]
    return found


def grade(config, log):
    found = statuses(log)
    canary = config.get("canary", "")
    report = {"instance_id": config["instance_id"], "resolved": False, "invalid_log": ""}
    if canary:
        canary_status = [s for t, s in found.items() if canary in t]
        found = {t: s for t, s in found.items() if canary not in t}
        if canary_status != ["FAILED"]:
            report["invalid_log"] = "the planted canary test is not reported as failed (%s)" % canary_status
    f2p_ok = [t for t in config["FAIL_TO_PASS"] if found.get(t) == "PASSED"]
    p2p_ok = [t for t in config["PASS_TO_PASS"] if found.get(t) in ("PASSED", "XFAIL")]
    report["tests_status"] = {
        "FAIL_TO_PASS": {"success": f2p_ok, "failure": [t for t in config["FAIL_TO_PASS"] if t not in f2p_ok]},
        "PASS_TO_PASS": {"success": p2p_ok, "failure": [t for t in config["PASS_TO_PASS"] if t not in p2p_ok]},
    }
    report["resolved"] = not report["invalid_log"] and all(
        not part["failure"] for part in report["tests_status"].values()
    )
    return report


def main(argv):
    if len(argv) != 4:
        sys.exit("usage: grade.py CONFIG.json TEST_LOG OUT_DIR")
    config = json.loads(Path(argv[1]).read_text())
    log_path, out = Path(argv[2]), Path(argv[3])
    log = log_path.read_text(errors="replace") if log_path.exists() else ""
    report = grade(config, log)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=1))
    (out / "reward.txt").write_text("1\n" if report["resolved"] else "0\n")
    print("%s: %s" % (config["instance_id"], "resolved" if report["resolved"] else "unresolved"))


if __name__ == "__main__":
    main(sys.argv)
