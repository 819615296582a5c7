"""Scaffolds that misbehave, one way per sample: run as a program by the harness, imported as a plugin by the tests."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    import json
    import os
    import subprocess
    import time
    import urllib.error
    import urllib.request

    import harness_shell

    sample = harness_shell.task()["sample"]
    if sample == 0:  # crashes
        print("about to fail")
        sys.exit(3)
    if sample == 1:  # hangs, with a child of its own
        child = subprocess.Popen(["sleep", "3600"])
        (open(os.path.join(os.environ["HARNESS_OUTPUT_DIR"], "child.pid"), "w")).write(str(child.pid))
        time.sleep(3600)
    if sample == 2:  # floods its output
        while True:
            sys.stdout.write("x" * 65536)
    if sample == 3:  # sends malformed requests, then leaves without submitting
        for body in (b"{not json", json.dumps({"model": "harness", "messages": 7}).encode()):
            request = urllib.request.Request(
                os.environ["OPENAI_BASE_URL"] + "/chat/completions",
                data=body,
                headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
            )
            try:
                urllib.request.urlopen(request, timeout=30)
            except urllib.error.HTTPError as err:
                print(err.code)
        harness_shell.run("echo still here")
else:
    from pathlib import Path

    from harness.scaffolds import Scaffold

    misbehaving = Scaffold("misbehaving", [sys.executable, str(Path(__file__).resolve())], output_limit=1 << 20)
