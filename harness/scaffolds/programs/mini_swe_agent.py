"""mini-swe-agent on a harness episode, run with the Python that has `mini-swe-agent` installed.

Its DefaultAgent, its text-based model and its SWE-bench prompts (`swebench_backticks.yaml`: one
bash code block per turn) as they are; its model calls go to the harness's intercepting endpoint
(litellm's OpenAI provider), its commands to the episode's sandbox through `harness_shell`. The
agent's own trajectory is saved in HARNESS_OUTPUT_DIR.
"""

from __future__ import annotations

import os

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of litellm's price list
os.environ.setdefault("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1")  # the endpoint's refusals are final

import shlex  # noqa: E402
from pathlib import Path  # noqa: E402

import litellm  # noqa: E402
import yaml  # noqa: E402
from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.config import builtin_config_dir  # noqa: E402
from minisweagent.environments.local import LocalEnvironment  # noqa: E402
from minisweagent.exceptions import Submitted  # noqa: E402
from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel  # noqa: E402

import harness_shell  # noqa: E402

litellm.suppress_debug_info = True  # no provider list printed when cost tracking does not know the model
CONFIG = builtin_config_dir / "benchmarks" / "swebench_backticks.yaml"


class SandboxEnvironment(LocalEnvironment):
    """mini-swe-agent's local environment with each command run in the episode's sandbox instead."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if self.config.env:
            harness_shell.run("export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in self.config.env.items()))

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict:
        command = f"cd {shlex.quote(cwd or self.config.cwd)} && {action.get('command', '')}"
        try:
            result = harness_shell.run(command, timeout=timeout or self.config.timeout)
            output = {
                "output": result["output"],
                "returncode": result["exit_code"],
                "exception_info": f"The command timed out after {timeout or self.config.timeout} s."
                if result["timed_out"]
                else "",
            }
        except harness_shell.ShellError as err:
            output = {
                "output": "",
                "returncode": -1,
                "exception_info": f"An error occurred while executing the command: {err}",
            }
        self._check_finished(output)
        return output

    def _check_finished(self, output: dict) -> None:
        try:
            super()._check_finished(output)
        except Submitted:
            harness_shell.submit()
            raise


def main() -> None:
    task = harness_shell.task()
    config = yaml.safe_load(CONFIG.read_text())
    environment = SandboxEnvironment(
        **{**config["environment"], "cwd": task["workdir"], "timeout": int(task["command_timeout"])}
    )
    model = LitellmTextbasedModel(
        **{
            **config["model"],
            "model_name": f"openai/{os.environ['HARNESS_MODEL']}",
            "cost_tracking": "ignore_errors",
            "model_kwargs": {
                "api_base": os.environ["OPENAI_BASE_URL"],
                "api_key": os.environ["OPENAI_API_KEY"],
                "drop_params": True,
            },
        }
    )
    output = Path(os.environ["HARNESS_OUTPUT_DIR"]) / "mini-swe-agent.traj.json"
    agent = DefaultAgent(
        model, environment, **{**config["agent"], "step_limit": int(task["max_turns"]), "output_path": output}
    )
    result = agent.run(task["statement"])
    print(f"mini-swe-agent: {result.get('exit_status')}")


if __name__ == "__main__":
    main()
