"""Run SkyRL's own examples/train/gsm8k/gsm8k_dataset.py on local GSM8K JSONL (no hub).

    python3 tests/tasks/skyrl_gsm8k_runner.py SCRIPT SOURCE_DIR OUTPUT_DIR

The script runs unchanged as `__main__`; only `datasets.load_dataset("openai/gsm8k", "main")`
is answered from SOURCE_DIR/train.jsonl and SOURCE_DIR/test.jsonl instead of the hub.
"""

from __future__ import annotations

import runpy
import sys

import datasets


def main(script: str, source: str, output: str) -> None:
    hub = datasets.load_dataset

    def local(name, config=None, **kwargs):
        if (name, config) != ("openai/gsm8k", "main"):
            raise ValueError(f"only openai/gsm8k (main) is served locally, not {name} ({config})")
        return hub("json", data_files={"train": f"{source}/train.jsonl", "test": f"{source}/test.jsonl"}, **kwargs)

    datasets.load_dataset = local
    sys.argv = [script, "--output_dir", output]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(*sys.argv[1:4])
