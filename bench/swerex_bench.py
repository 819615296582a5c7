"""Sandbox start and command round trip: ours against SWE-ReX, in the same image, one run.

    python -m bench.swerex_bench [--starts 6] [--round-trips 200]

SWE-ReX (from PyPI, `swe-rex==1.4.0` plus `aiohttp`, which its client imports but does not
declare, in its own venv under the harness cache, made on first use) runs a server (`swerex-remote`) inside the container and talks HTTP to it through a
published port. Its server is installed into the image offline: the wheels pip downloaded for
the venv are copied into a layer on our base image (`harness-bench/swerex`, built once), so
both sides start the same Debian and Python. Its `DockerDeployment` then does what it always
does: `docker run -p PORT:8000` with `swerex-remote` as the command, then polls until alive.
Its client needs a network path to the server: it publishes a port (`-p PORT:8000`), which
needs a bridge network. This machine's Docker engine runs with `--bridge=none
--iptables=false`, so the bench gives its container the host's network and starts its server
on 127.0.0.1 at the port its deployment picked (the one change to its start command; ours
runs with no network at all). It gets our sandbox's CPU, memory and pids limits and never
pulls.

- start: from the call to ready for a first command (ours: `backend.create`, cold; SWE-ReX:
  `DockerDeployment.start()`), and the removal after (ours: `close`; SWE-ReX: `stop`);
- round trip: a `true` in a persistent bash session (ours: `sandbox.exec`; SWE-ReX:
  `run_in_session(BashAction)`), p50.

A driver script runs inside the venv and reports its own timings, so interpreter start and
imports never count.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sandboxes import SandboxSpec, get_backend
from sandboxes.docker_backend import docker_client
from sandboxes.images import build_base_image, build_image, cache_dir, image_exists

SWE_REX = "swe-rex==1.4.0"
BENCH_LABEL = "harness.bench.run"

DRIVER = r'''
"""Starts SWE-ReX deployments, times round trips in a bash session; prints JSON."""
import asyncio
import json
import sys
import time

from swerex.deployment.docker import DockerDeployment
from swerex.runtime.abstract import BashAction, CreateBashSessionRequest

job = json.load(sys.stdin)


class LoopbackDeployment(DockerDeployment):
    """Its server on 127.0.0.1 of the host's network (this Docker engine has no bridge to publish a port through)."""

    def _get_swerex_start_cmd(self, token):
        return ["/bin/sh", "-c", f"swerex-remote --auth-token {token} --host 127.0.0.1 --port {self._config.port}"]


async def main():
    starts, stops, trips = [], [], []
    for number in range(job["starts"]):
        deployment = LoopbackDeployment(image=job["image"], pull="never", docker_args=job["docker_args"], startup_timeout=60)
        started = time.perf_counter()
        await deployment.start()
        starts.append(time.perf_counter() - started)
        try:
            if number == 0:
                await deployment.runtime.create_session(CreateBashSessionRequest())
                await deployment.runtime.run_in_session(BashAction(command="true"))
                for _ in range(job["round_trips"]):
                    clock = time.perf_counter()
                    out = await deployment.runtime.run_in_session(BashAction(command="true"))
                    trips.append(time.perf_counter() - clock)
                    assert out.exit_code == 0, out
        finally:
            clock = time.perf_counter()
            await deployment.stop()
            stops.append(time.perf_counter() - clock)
    import importlib.metadata
    print("SWEREX_BENCH_RESULT " + json.dumps({"version": importlib.metadata.version("swe-rex"), "start_s": starts, "stop_s": stops, "round_trip_s": trips}), flush=True)


asyncio.run(main())
'''


class BenchError(RuntimeError):
    pass


class PeerUnavailable(BenchError):
    """SWE-ReX could not be installed into its venv."""


def venv() -> Path:
    return cache_dir() / "bench" / "swe-rex-venv"


def wheels() -> Path:
    return cache_dir() / "bench" / "swe-rex-wheels"


def swerex_python(console: Console) -> Path:
    """The venv's python with SWE-ReX installed, and its wheels downloaded for the image (both made once)."""
    python = venv() / "bin" / "python"
    wanted = SWE_REX.split("==")[1]
    probe = [str(python), "-c", "import importlib.metadata as m; print(m.version('swe-rex'))"]
    probe[-1] += "; import aiohttp"  # its client needs aiohttp, which swe-rex 1.4.0 does not declare
    ready = (
        python.exists() and subprocess.run(probe, capture_output=True, text=True, check=False).stdout.strip() == wanted
    )
    if ready and any(wheels().glob("swe_rex-*.whl")):
        return python
    console.print(f"[bold]installing {SWE_REX} into {venv()} (once)...")
    for command in (
        [sys.executable, "-m", "venv", "--clear", str(venv())],
        [str(python), "-m", "pip", "install", "-q", SWE_REX, "aiohttp"],
        [str(python), "-m", "pip", "download", "-q", "-d", str(wheels()), SWE_REX],
    ):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PeerUnavailable(f"`{' '.join(command)}` failed: {(done.stderr or done.stdout)[-2000:]}")
    return python


def swerex_image(base: str) -> str:
    """Our base image plus SWE-ReX's server, installed from the downloaded wheels (no network)."""
    tag = f"harness-bench/swerex:{SWE_REX.split('==')[1]}-{base.split(':')[-1]}"
    if not image_exists(tag):
        dockerfile = (
            f"FROM {base}\nCOPY wheels /tmp/swerex-wheels\n"
            f"RUN python3 -m venv --without-pip /opt/swerex && python3 -m pip --python /opt/swerex/bin/python install -q --no-index "
            f"--find-links /tmp/swerex-wheels '{SWE_REX}' "
            "&& ln -s /opt/swerex/bin/swerex-remote /usr/local/bin/swerex-remote && rm -rf /tmp/swerex-wheels\n"
        )
        build_image(tag, dockerfile, {"wheels": wheels()}, {"harness.bench": "swerex"})
    return tag


def run_swerex(python: Path, image: str, spec: SandboxSpec, starts: int, round_trips: int) -> dict:
    label = f"{BENCH_LABEL}=swerex-{time.time_ns()}"
    job = {
        "image": image,
        "starts": starts,
        "round_trips": round_trips,
        "docker_args": [
            f"--cpus={spec.cpus}",
            f"--memory={spec.memory}",
            f"--memory-swap={spec.memory}",
            f"--pids-limit={spec.pids}",
            f"--label={label}",
            "--network=host",
        ],
    }
    try:
        done = subprocess.run(
            [str(python), "-c", DRIVER], input=json.dumps(job), capture_output=True, text=True, timeout=300, check=False
        )
    finally:
        for container in docker_client().containers.list(all=True, filters={"label": label}, ignore_removed=True):
            container.remove(force=True)
    if done.returncode != 0:
        raise BenchError(f"the SWE-ReX driver failed:\n{done.stderr[-3000:]}")
    lines = [
        line for line in done.stdout.splitlines() if line.startswith("SWEREX_BENCH_RESULT ")
    ]  # it logs to stdout too
    if not lines:
        raise BenchError(f"the SWE-ReX driver printed no result:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return json.loads(lines[-1].split(" ", 1)[1])


def run_ours(spec: SandboxSpec, starts: int, round_trips: int) -> dict:
    backend = get_backend("docker")
    result = {"start_s": [], "stop_s": [], "round_trip_s": []}
    for number in range(starts):
        clock = time.perf_counter()
        sandbox = backend.create(spec)
        result["start_s"].append(time.perf_counter() - clock)
        if number == 0:
            sandbox.exec("true")
            for _ in range(round_trips):
                clock = time.perf_counter()
                if sandbox.exec("true").exit_code != 0:
                    raise BenchError("`true` failed in our sandbox")
                result["round_trip_s"].append(time.perf_counter() - clock)
        clock = time.perf_counter()
        sandbox.close()
        result["stop_s"].append(time.perf_counter() - clock)
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=6, help="sandboxes started per side and round (default 6)")
    parser.add_argument("--round-trips", type=int, default=200, help="commands timed per side and round (default 200)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, alternating which side goes first (default 2)")
    args = parser.parse_args(argv)
    console = Console()
    python = swerex_python(console)
    base = build_base_image()
    console.print("[bold]building the SWE-ReX image layer (once)...")
    image = swerex_image(base)
    spec = SandboxSpec(image=base, memory="2g", pids=512, wall_time=900)
    sides: dict[str, dict[str, list[float]]] = {"ours": {}, "swerex": {}}
    version = ""
    for round_number in range(args.rounds):
        for side in ("ours", "swerex") if round_number % 2 == 0 else ("swerex", "ours"):
            console.print(f"round {round_number + 1}/{args.rounds}: {side}")
            got = (
                run_ours(spec, args.starts, args.round_trips)
                if side == "ours"
                else run_swerex(python, image, spec, args.starts, args.round_trips)
            )
            version = got.pop("version", version)
            for key, values in got.items():
                sides[side].setdefault(key, []).extend(values)
    result = {
        "swe_rex": version,
        "starts": args.starts * args.rounds,
        "round_trips": args.round_trips * args.rounds,
        **{
            side: {key: statistics.median(values) for key, values in measures.items()}
            for side, measures in sides.items()
        },
    }
    o, p = result["ours"], result["swerex"]
    table = Table(
        title=f"sandbox start and round trip, same image (medians of {result['starts']} starts, "
        f"{result['round_trips']} round trips; ratios are ours / SWE-ReX)"
    )
    for column in ("measure", "ours", f"SWE-ReX {version}", "ratio"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    for name, key, unit in (
        ("start, until a command can run", "start_s", 1),
        ("removal", "stop_s", 1),
        ("round trip (`true` in a bash session)", "round_trip_s", 1000),
    ):
        suffix = " ms" if unit == 1000 else " s"
        table.add_row(name, f"{o[key] * unit:.2f}{suffix}", f"{p[key] * unit:.2f}{suffix}", f"{o[key] / p[key]:.3f}")
    console.print(table)
    return result


if __name__ == "__main__":
    main()
