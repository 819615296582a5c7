"""Harbor task directories: read, built offline on stand-in bases, run with the oracle and with nothing, on Docker
and overlay; every kind of bad input a clear error of its own task."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from sandboxes import SandboxError
from sandboxes.standins import image_key, standin_for
from tasks.harbor.config import HarborTaskError, read_task_dir
from tasks.harbor import image as image_module
from tasks.harbor.image import _rewrite, dockerfile_instructions, shell_installs
from tasks.harbor.verify import VerifierFailed, parse_reward_json, parse_reward_text, scalar_reward
from tests.cli_helpers import harness, rows_of
from tests.tasks.harbor_init import assert_atif_valid, init_task

# Every task that builds shares one stand-in (bookworm with jq, tree and curl), so the suite makes one base. The
# install is continued over lines, as most real tasks write it: its packages are still found and had ahead.
DOCKERFILE = """\
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends \\
    jq \\
    && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir six==1.16.0
WORKDIR /app
"""
DIGEST = "sha256:" + "ab" * 32
TEST_PREAMBLE = """\
#!/bin/bash
apt-get update > /dev/null
apt-get install -y tree curl > /dev/null
pip install tomli-w==1.0.0 > /dev/null
"""
TOML = """\
version = "1.0"
[metadata]
difficulty = "easy"
[verifier]
timeout_sec = {verifier}
[verifier.env]
GREETING = "hi"
[agent]
timeout_sec = {agent}
[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 1024
storage_mb = 2048
allow_internet = false
"""


def write_task(
    root: Path, name: str, *, dockerfile=DOCKERFILE, test="", solve=None, toml=None, agent=60, verifier=60, files=None
):
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "task.toml").write_text(toml if toml is not None else TOML.format(agent=agent, verifier=verifier))
    (task / "instruction.md").write_text(f"Task {name}: do what the tests check.\n")
    (task / "environment" / "Dockerfile").write_text(dockerfile)
    (task / "tests" / "test.sh").write_text(TEST_PREAMBLE + textwrap.dedent(test))
    if solve is not None:
        (task / "solution").mkdir()
        (task / "solution" / "solve.sh").write_text("#!/bin/bash\n" + textwrap.dedent(solve))
    for relative, data in (files or {}).items():
        (task / relative).parent.mkdir(parents=True, exist_ok=True)
        (task / relative).write_bytes(data)
    return task


def reward_txt(condition: str) -> str:
    return f"if {condition}; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"


BINARY = bytes(range(256))
PRIOR_CONTEXT = {
    "schema_version": "ATIF-v1.6",
    "session_id": "prior",
    "agent": {"name": "someone", "version": "1"},
    "steps": [{"step_id": 1, "source": "user", "message": "Earlier: look around /app first."}],
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("harbor") / "dataset"
    # reward.txt; the verifier's tools installed ahead (jq from the Dockerfile, tree and tomli-w from test.sh),
    # its working directory and [verifier].env
    write_task(
        root,
        "hello",
        test=reward_txt(
            'python3 -c "import six, tomli_w" && command -v jq && command -v tree && [ "$PWD" = /app ] '
            '&& [ "$GREETING" = hi ] && [ "$(cat /app/hello.txt)" = hello ]'
        ),
        solve="echo hello > hello.txt\n",
        # prior context Harbor seeds its agents with (not its oracle or nop): ours start from the instruction
        files={"trajectory.json": json.dumps(PRIOR_CONTEXT).encode()},
    )
    # reward.json with several rewards (it wins over reward.txt); a digest-pinned, registry-prefixed base; a
    # binary solution file; a file of tests/ read from /tests
    write_task(
        root,
        "multi",
        dockerfile=f"FROM docker.io/library/debian:bookworm-slim@{DIGEST}\n"
        "RUN apt-get update && apt-get install -y jq tree\nWORKDIR /work\n",
        test="""\
            set -e
            r=0; cmp -s /work/data.bin /tests/data.bin && [ "$(cat /work/answer.txt)" = 42 ] && r=1
            printf '{"reward": %s, "answer": %s, "style": 0.5}' $r $r > /logs/verifier/reward.json
            echo 0.25 > /logs/verifier/reward.txt
        """,
        solve="echo 42 > answer.txt && cp /solution/data.bin /work/data.bin\n",
        files={"solution/data.bin": BINARY, "tests/data.bin": BINARY},
    )
    # Harbor's own template of a test script (`harbor tasks init`): uv from its installer, pytest through uvx
    write_task(
        root,
        "uv-pytest",
        test="""\
            curl -LsSf https://astral.sh/uv/0.9.7/install.sh | sh
            source "$HOME/.local/bin/env"
            if uvx \\
              --with pytest==8.4.1 \\
              --with pytest-json-ctrf==0.3.5 \\
              pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA; then
              echo 1 > /logs/verifier/reward.txt
            else
              echo 0 > /logs/verifier/reward.txt
            fi
        """,
        solve='echo "Hello, world!" > hello.txt\n',
        files={
            "tests/test_outputs.py": b'from pathlib import Path\n\n\ndef test_hello():\n    assert Path("/app/hello.txt").read_text().strip() == "Hello, world!"\n'
        },
    )
    # a user of the image's own: the agent and the verifier run as that user, in its home
    write_task(
        root,
        "non-root",
        dockerfile=DOCKERFILE + "RUN useradd -m player\nUSER player\nWORKDIR /home/player\n",
        test=reward_txt('[ "$(whoami)" = player ] && [ "$PWD" = /home/player ] && [ -f done ]'),
        solve="touch done\n",
    )
    write_task(root, "slow-verifier", test="sleep 60\n" + reward_txt("true"), solve="true\n", verifier=3)
    write_task(root, "hanging-solution", test=reward_txt("[ -f /app/done ]"), solve="sleep 600; touch done\n", agent=4)
    write_task(root, "no-reward", test="echo 'all good'\n", solve="true\n")
    write_task(root, "garbage-reward", test="echo lots > /logs/verifier/reward.txt\n", solve="true\n")
    write_task(root, "build-fails", dockerfile=DOCKERFILE + "RUN echo broken && exit 3\n", solve="true\n")
    write_task(root, "downloads-in-tests", test="curl -fsSL https://example.com/check.sh | bash\n", solve="true\n")
    write_task(root, "unknown-base", dockerfile="FROM someorg/custom:1\n", solve="true\n")
    write_task(root, "unparsable", dockerfile=DOCKERFILE + "BOGUS step\n", solve="true\n")
    write_task(root, "bad-toml", toml="[verifier\ntimeout_sec = ", solve="true\n")
    (write_task(root, "no-instruction", solve="true\n") / "instruction.md").unlink()
    (write_task(root, "no-tests", solve="true\n") / "tests" / "test.sh").unlink()
    (write_task(root, "compose", solve="true\n") / "environment" / "docker-compose.yaml").write_text(
        "services:\n  main:\n    network_mode: none\n  db:\n    image: postgres:16\n"
    )
    init_task(root, "two-steps", "--steps", "2")  # Harbor's own multi-step template
    return root


# What each task gives, whoever plays it: (reward or None for no verdict, exit status, words of its error)
UNBUILDABLE = {
    "build-fails": "echo broken && exit 3' returned a non-zero code: 3",
    "unknown-base": "no stand-in for the base image 'someorg/custom:1'",
    "unparsable": "was refused: dockerfile parse error",
    "downloads-in-tests": "downloads at test time, and the sandbox has no network: curl -fsSL https://example.com/check.sh",
    "bad-toml": "not valid TOML",
    "no-instruction": "no instruction.md",
    "no-tests": "no tests/test.sh",
    "compose": "a docker-compose environment (services: main, db) is not supported",
    "two-steps": "steps/step-1/instruction.md: empty",  # Harbor's multi-step template as it comes
}


def check_run(out: Path, policy: str, backend: str) -> dict[str, dict]:
    rows = {row["task_id"]: row for row in rows_of(out / "results.jsonl")}
    assert len(rows) == 17, sorted(rows)
    solved = 1.0 if policy == "gold" else 0.0
    assert (rows["hello"]["reward"], rows["hello"]["error"]) == (solved, ""), rows["hello"]
    assert (rows["multi"]["reward"], rows["multi"]["error"]) == (solved, ""), rows["multi"]
    assert (rows["uv-pytest"]["reward"], rows["uv-pytest"]["error"]) == (solved, ""), rows["uv-pytest"]
    if (
        backend != "overlay"
    ):  # bubblewrap maps only the user to root's files: what the image gave the user is not its own
        assert (rows["non-root"]["reward"], rows["non-root"]["error"]) == (solved, ""), rows["non-root"]
    assert "scoring failed" in rows["slow-verifier"]["error"] and "timeout_sec (3 s)" in rows["slow-verifier"]["error"]
    assert "wrote no reward" in rows["no-reward"]["error"] and "all good" in rows["no-reward"]["error"]
    assert "not a number: 'lots" in rows["garbage-reward"]["error"]
    for name, words in UNBUILDABLE.items():
        assert rows[name]["exit_status"] == "sandbox_error" and words in rows[name]["error"], rows[name]
    hang = rows["hanging-solution"]
    assert hang["reward"] == 0.0
    assert "[agent].timeout_sec (4 s) ran out" in hang["error"] if policy == "gold" else not hang["error"]
    return rows


def run(dataset: Path, out: Path, policy: str, backend: str) -> dict[str, dict]:
    done = harness(
        "eval", "--checkpoint", policy, "--tasks", f"harbor:{dataset}", "--backend", backend,
        "--output", str(out), "--workers", "3",
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: some tasks could not be evaluated
    return check_run(out, policy, backend)


def test_load_builds_once_and_records_substitutions(dataset, docker_backend):
    from tasks.taskset import load_tasks

    tasks = {task.id: task for task in load_tasks(f"harbor:{dataset}")}
    hello, multi = tasks["hello"], tasks["multi"]
    assert hello.env_class == "harbor" and hello.prompt[0]["content"].startswith("Task hello")
    assert hello.sandbox.workdir == "/app" and multi.sandbox.workdir == "/work"
    assert (hello.sandbox.memory, hello.sandbox.disk, hello.sandbox.network) == ("1024m", "2048m", False)
    assert hello.metadata["base_substituted"] == [
        "python:3.11-slim -> the Debian bookworm base (Python 3.11; python:3.11*)"
    ]
    assert multi.metadata["base_substituted"][0].startswith(f"docker.io/library/debian:bookworm-slim@{DIGEST} ->")
    assert hello.metadata["verifier_installed_ahead"] == {"apt": ["tree", "curl"], "pip": ["tomli-w==1.0.0"]}
    assert tasks["uv-pytest"].metadata["verifier_installed_ahead"] == {
        "apt": ["tree", "curl"],
        "pip": ["tomli-w==1.0.0", "pytest==8.4.1", "pytest-json-ctrf==0.3.5"],
        "uv": "uv==0.9.7",
    }
    assert hello.metadata["network"] == "none"
    assert load_tasks(f"harbor:{dataset / 'hello'}")[0].sandbox.image == hello.sandbox.image  # one image, reused
    assert tasks["bad-toml"].sandbox is None and "not valid TOML" in tasks["bad-toml"].metadata["harbor_problem"]


def test_oracle_and_nothing_on_docker(dataset, tmp_path, docker_backend):
    gold = run(dataset, tmp_path / "gold", "gold", "docker")
    details = json.loads((tmp_path / "gold" / "trajectories" / "multi__0.json").read_text())["reward_details"]
    assert details["rewards"] == {"reward": 1.0, "answer": 1.0, "style": 0.5}
    assert details["reward_file"] == "reward.json"
    assert gold["hanging-solution"]["exit_status"] == "wall_time"
    notes = json.loads((tmp_path / "gold" / "report.json").read_text())["task_notes"]
    hello = notes["hello"]  # the report says how each image was made, and its disk
    assert hello[0] == "base_substituted: python:3.11-slim -> the Debian bookworm base (Python 3.11; python:3.11*)"
    assert hello[1] == "installed ahead: apt jq, tree, curl; pip six==1.16.0, tomli-w==1.0.0"
    assert re.fullmatch(r"image: harness-harbor/hello:\w+, \d+\.\d MiB of its own", hello[2]), hello
    assert "## How the tasks were made" in (tmp_path / "gold" / "report.md").read_text()
    assert hello[3] == "prior context ignored: trajectory.json"
    assert "bad-toml" not in notes  # a task that cannot run has its error instead
    run(dataset, tmp_path / "empty", "empty", "docker")


def test_the_oracle_has_the_agents_time_not_one_commands(tmp_path, docker_backend):
    """solve.sh runs past the per-command limit (2 s here) for up to `[agent].timeout_sec`, as Harbor's oracle does;
    one that outlasts that is stopped there, the episode ends (`wall_time`) and the verifier still scores it."""
    from concurrent.futures import ThreadPoolExecutor

    from harness.episode import Limits, run_episode
    from harness.policies.scripted import GoldPolicy
    from harness.policy import Sampling
    from tasks.taskset import load_tasks

    write_task(tmp_path, "builds-slowly", test=reward_txt("[ -f /app/built ]"), solve="sleep 3; touch built\n")
    write_task(
        tmp_path,
        "outlasts-agent-time",
        test=reward_txt("[ -f /app/half ] && [ ! -f /app/done ]"),  # ran past 2 s, stopped at 6 s, then verified
        solve="sleep 3; touch half; sleep 600; touch done\n",
        agent=6,
    )
    tasks = load_tasks(f"harbor:{tmp_path}")
    with ThreadPoolExecutor(2) as pool:
        slow, cut = pool.map(
            lambda task: run_episode(
                task, GoldPolicy(), Sampling(temperature=0.0), Limits(command_timeout=2), backend=docker_backend
            ),
            tasks,
        )
    assert (slow.task_id, slow.exit_status, slow.reward, slow.error) == ("builds-slowly", "submitted", 1.0, "")
    assert "solve.sh exited with 0" in slow.messages[-3]["content"], slow.messages[-3:]
    assert (cut.task_id, cut.exit_status, cut.reward) == ("outlasts-agent-time", "wall_time", 1.0), cut.error
    assert cut.error == "the task's [agent].timeout_sec (6 s) ran out"
    assert "timed out" in cut.messages[-2]["content"] and cut.timings["total_s"] < 60, cut.messages[-3:]


@pytest.mark.parametrize("other", ["overlay", pytest.param("podman", marks=pytest.mark.slow)])
def test_the_same_rewards_without_the_docker_daemon(dataset, tmp_path, other, request):
    """The images Docker built, run under bubblewrap over their layers (overlay) and in Podman's containers."""
    request.getfixturevalue(f"{other}_backend")
    run(dataset, tmp_path / "gold", "gold", other)
    run(dataset, tmp_path / "empty", "empty", other)


# ----------------------------------------------------------------------------- no sandbox needed


def test_stand_ins_map_by_repository_and_tag(tmp_path, monkeypatch):
    assert (
        image_key("ghcr.io/laude-institute/t-bench/python-3-13:20250620")
        == "laude-institute/t-bench/python-3-13:20250620"
    )
    assert image_key(f"debian@{DIGEST}") == "debian:latest"
    assert image_key("public.ecr.aws/docker/library/python:3.11-slim") == "python:3.11-slim"
    assert standin_for("ubuntu:22.04").python == "3.11" and standin_for("python:3.13-slim-trixie").python == "3.13"
    with pytest.raises(SandboxError, match="register_standin"):
        standin_for("someorg/custom:1")
    # toolchain images: the language's base (trixie, Python 3.13, with Debian's toolchain)
    node, go = standin_for("docker.io/library/node:20-slim"), standin_for("golang:1.24-bookworm")
    assert (node.python, node.language, "nodejs" in node.packages) == ("3.13", "javascript", True)
    assert (go.language, standin_for("rust:1-slim").language) == ("go", "rust") and go.base != node.base
    extra = tmp_path / "standins.json"
    extra.write_text('{"someorg/*": "3.9", "acme/node-*": "javascript"}')
    monkeypatch.setenv("HARNESS_STANDINS", str(extra))
    assert standin_for("someorg/custom:1").python == "3.9"
    assert standin_for("acme/node-ci:3").packages == node.packages
    extra.write_text('{"someorg/*": "cobol"}')
    with pytest.raises(SandboxError, match="no base 'cobol'"):
        standin_for("someorg/custom:1")


def test_installs_found_in_scripts(tmp_path):
    (tmp_path / "requirements.txt").write_text("numpy==2.0.0  # pinned\n")
    script = """\
        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends curl=7.88 git
        pip3 install -q pytest==8.4.1 -r requirements.txt --index-url https://example.org/simple
        python3 -m pip install requests && uv pip install --system six
        curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh
        uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest /tests/test_outputs.py
    """
    found = shell_installs(textwrap.dedent(script), [tmp_path])
    assert found.apt == ["curl", "git"]
    assert found.pip == ["pytest==8.4.1", "numpy==2.0.0", "requests", "six", "pytest-json-ctrf==0.3.5"]
    assert found.uv == "uv==0.9.5" and not found.local and not found.fetches
    fetching = shell_installs("curl -s http://localhost:8000/ok\nwget -q https://example.com/data.csv\ngit clone x", [])
    assert fetching.fetches == ["wget -q https://example.com/data.csv", "git clone x"]
    assert dockerfile_instructions("FROM a AS b\n# note\nRUN x && \\\n  y\n") == [
        ("FROM", "a AS b"),
        ("RUN", "x && \n  y"),
    ]
    rebuilt = _rewrite(dockerfile_instructions("FROM a\nRUN x && \\\n  y\n"), {}, {}, False)[1]
    assert "RUN x &&  \\\n  y\n" in rebuilt  # continuation lines stay continued


def test_here_documents_become_commands_the_classic_builder_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(image_module, "HEREDOC_FILE", str(tmp_path / "heredoc"))
    out = tmp_path / "main.go"
    dockerfile = f"FROM a\nRUN cat > {out} <<'GO'\npackage main\n# not a comment here\n  $HOME stays\nGO\n"
    dockerfile += 'RUN <<-"SH"\n\techo script >> ' + str(out) + "\n\tSH\nWORKDIR /app\n"
    instructions = dockerfile_instructions(dockerfile)
    assert [keyword for keyword, _ in instructions] == ["FROM", "RUN", "RUN", "WORKDIR"]
    for _, command in instructions[1:3]:
        subprocess.run(["sh", "-c", command], check=True)
    assert out.read_text() == "package main\n# not a comment here\n  $HOME stays\nscript\n"
    assert not (tmp_path / "heredoc").exists()
    with pytest.raises(HarborTaskError, match="delimiter is not quoted"):
        dockerfile_instructions("FROM a\nRUN cat <<END\n$HOME\nEND\n")
    with pytest.raises(HarborTaskError, match="has no closing END"):
        dockerfile_instructions("FROM a\nRUN cat <<'END'\nx\n")


def test_rewards_are_read_as_harbor_reads_them():
    assert parse_reward_text("1\n") == 1.0 and parse_reward_json('{"reward": 0.5, "extra": 2}') == {
        "reward": 0.5,
        "extra": 2.0,
    }
    assert scalar_reward({"reward": 0.5, "extra": 2.0}) == 0.5 and scalar_reward({"a": 1.0, "b": 0.0}) == 0.5
    for bad in ("", "nan", "one"):
        with pytest.raises(VerifierFailed):
            parse_reward_text(bad)
    for bad in ("", "[1]", "{}", '{"reward": "1"}', '{"reward": true}', "{"):
        with pytest.raises(VerifierFailed):
            parse_reward_json(bad)


def test_task_toml_is_checked(tmp_path):
    task = write_task(tmp_path, "t", toml='[agent]\ntimeout_sec = "soon"\n')
    with pytest.raises(HarborTaskError, match="timeout_sec = 'soon' has the wrong type"):
        read_task_dir(task)
    (task / "task.toml").write_text('[environment]\nmemory = "2G"\nstorage = "512M"\nworkdir = "/srv"\n')
    read = read_task_dir(task)
    assert (read.memory_mb, read.storage_mb, read.workdir, read.verifier_timeout) == (2048, 512, "/srv", 600.0)
    (task / "task.toml").write_text("[[steps]]\nname = 'one'\n")
    with pytest.raises(HarborTaskError, match=r"steps/one: no instruction.md"):
        read_task_dir(task)
    (task / "task.toml").write_text("[[steps]]\nname = '../up'\n")
    with pytest.raises(HarborTaskError, match=r"name = '../up': expected a plain directory name"):
        read_task_dir(task)
    (task / "task.toml").write_text("[[steps]]\nname = 'one'\nmin_reward = 'high'\n")
    (task / "steps" / "one").mkdir(parents=True)
    (task / "steps" / "one" / "instruction.md").write_text("Do it.\n")
    with pytest.raises(HarborTaskError, match=r"step 'one': min_reward = 'high': expected a number or a table"):
        read_task_dir(task)
    (task / "environment" / "docker-compose.yaml").write_text("services: [\n")
    (task / "task.toml").write_text("")
    with pytest.raises(HarborTaskError, match="docker-compose.yaml: not valid YAML"):
        read_task_dir(task)


def test_run_and_generate_take_harbor_tasks_and_write_atif(dataset, tmp_path, docker_backend):
    """`harness run --tasks harbor:PATH` plays each task in turn, its turns streamed; `run` and `generate` write ATIF
    beside their own trajectories, valid by Harbor's validator, the reward file's every key kept."""
    folder = tmp_path / "three"
    folder.mkdir()
    for name in ("bad-toml", "hello", "multi"):
        (folder / name).symlink_to(dataset / name)
    out = tmp_path / "run"
    done = harness(
        "run", "--checkpoint", "gold", "--tasks", f"harbor:{folder}", "--backend", "docker", "--output", str(out),
        "--trajectory-format", "atif",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr  # not every task resolved: a task that cannot run
    text = " ".join(done.stdout.split())
    assert "solve.sh exited with 0" in text and "2 of 3 task(s) resolved" in text
    assert "bad-toml: exit status sandbox_error" in text and "not valid TOML" in text
    names = ["bad-toml__0.json", "hello__0.json", "multi__0.json"]
    assert sorted(p.name for p in (out / "trajectories").iterdir()) == names
    generated = tmp_path / "generated"
    done = harness(
        "generate", "--checkpoint", "gold", "--tasks", f"harbor:{dataset / 'hello'}", "--output", str(generated),
        "--backend", "docker", "--trajectory-format", "atif",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    written = [out / "atif" / name for name in names] + [generated / "run" / "atif" / "hello__0.json"]
    assert_atif_valid(written)
    never_ran = json.loads(written[0].read_text())["steps"]
    assert [step["source"] for step in never_ran] == ["system"] and "not valid TOML" in never_ran[0]["message"]
    docs = [json.loads(path.read_text())["extra"]["harness"] for path in written]
    assert [doc["reward"] for doc in docs] == [0.0, 1.0, 1.0, 1.0]
    assert docs[2]["reward_details"]["rewards"] == {"reward": 1.0, "answer": 1.0, "style": 0.5}


def test_run_and_eval_refuse_what_they_cannot_do(tmp_path):
    done = harness("run", "--checkpoint", "gold", "--tasks", "harbor:/nonexistent", "--repo", str(tmp_path))
    assert done.returncode == 1 and "--tasks runs a task set's own tasks" in done.stdout
    done = harness("run", "--checkpoint", "empty")
    assert done.returncode == 1 and "give a request and --repo" in done.stdout
    done = harness("run", "--checkpoint", "gold", "--tasks", "harbor:/nonexistent")
    assert done.returncode == 1 and "harbor:/nonexistent: no such directory" in done.stdout
    for command in ("eval", "run"):
        done = harness(command, "--checkpoint", "gold", "--tasks", "harbor:/nonexistent", "--trajectory-format", "x")
        assert done.returncode == 1 and "unknown trajectory format 'x' (known: harness, atif)" in done.stdout
