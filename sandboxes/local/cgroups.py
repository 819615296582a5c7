"""Memory, pids and cpu limits of local sandboxes through cgroups, v1 or v2: whichever holds each
controller on this host.

Each controller lives in one hierarchy: a v1 hierarchy of its own (older distributions, hybrid
setups), or the unified v2 hierarchy (current distributions). A sandbox's groups nest under this
process's own group. On v2 a group may hand controllers to its children only while it holds no
process itself, so where this process is alone in its group it moves into a leaf `harness-host`
first and then enables the controllers in the group it left (processes it starts later find that group
through the leaf). Whatever cannot be limited is said once as a warning, and `SandboxCgroups.limits`
records how each limit is enforced ("none: why" where it is not); memory then falls back to
RLIMIT_AS, which bounds address space, not resident memory.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..base import oom_kill_count
from ..spec import SandboxSpec, parse_bytes
from ..cgroupfs import cgroup_mounts, process_groups, read_text, write_control
from .process import kill

log = logging.getLogger(__name__)

CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000
HOST_LEAF = "harness-host"


@dataclass(frozen=True)
class Hierarchy:
    """Where sandbox groups are made for some controllers: `parent` in a v`version` hierarchy."""

    version: int
    parent: Path
    controllers: tuple[str, ...]


def limit_files(version: int, controller: str, spec: SandboxSpec) -> list[tuple[str, str]]:
    """The files of a sandbox's group that set `controller`'s limit, and their values."""
    memory = str(parse_bytes(spec.memory))
    quota = int(spec.cpus * CPU_PERIOD_US)
    files = {
        (1, "memory"): [("memory.limit_in_bytes", memory), ("memory.memsw.limit_in_bytes", memory)],
        (2, "memory"): [("memory.max", memory), ("memory.swap.max", "0")],
        (1, "pids"): [("pids.max", str(spec.pids))],
        (2, "pids"): [("pids.max", str(spec.pids))],
        (1, "cpu"): [("cpu.cfs_period_us", str(CPU_PERIOD_US)), ("cpu.cfs_quota_us", str(quota))],
        (2, "cpu"): [("cpu.max", f"{quota} {CPU_PERIOD_US}")],
    }
    return files[version, controller]


# Files that may be missing without the limit being lost: swap limits where swap accounting is off.
_OPTIONAL = {"memory.memsw.limit_in_bytes", "memory.swap.max"}


class SandboxCgroups:
    """One sandbox's groups (controller -> group; on v2 all share one) and how each limit holds."""

    def __init__(self, name: str, spec: SandboxSpec, hierarchies: list[Hierarchy], problems: list[str]):
        self.groups: dict[str, Path] = {}
        self.versions: dict[Path, int] = {}
        self.limits: dict[str, str] = {}
        problems = list(problems)
        for hierarchy in hierarchies:
            try:
                group = _make_group(hierarchy, name, spec)
            except OSError as err:
                problems.append(
                    f"cannot make a cgroup v{hierarchy.version} group in {hierarchy.parent}: {err.strerror}"
                )
                continue
            self.versions[group] = hierarchy.version
            for controller in hierarchy.controllers:
                self.groups[controller] = group
                self.limits[controller] = f"cgroup v{hierarchy.version} {group}"
        missing = [c for c in CONTROLLERS if c not in self.groups]
        self.rlimit_as = parse_bytes(spec.memory) if "memory" in missing else None
        why = "; ".join(problems) or "no cgroup"
        for controller in missing:
            self.limits[controller] = (
                "RLIMIT_AS (address space, not resident memory)" if controller == "memory" else "none"
            ) + f": {why}"
        if missing:
            fallback = " (memory falls back to RLIMIT_AS)" if "memory" in missing else ""
            warn_once(f"local sandboxes run without {'/'.join(missing)} cgroup limits{fallback}: {why}")

    @property
    def paths(self) -> list[Path]:
        """Every distinct group (a process joins each through its cgroup.procs)."""
        return list(self.versions)

    def oom_kill_count(self) -> int:
        """The memory group's OOM-kill counter (0 without one)."""
        group = self.groups.get("memory")
        if group is None:
            return 0
        return oom_kill_count(
            read_text(group / ("memory.events" if self.versions[group] == 2 else "memory.oom_control"))
        )

    def freeze(self, frozen: bool = True) -> bool:
        """Stop every process of the sandbox where it stands, or let them go on (v2 groups only;
        a frozen process dies of SIGKILL only once thawed); whether it took."""
        done = False
        for group, version in self.versions.items():
            if version == 2:
                done |= write_control(group / "cgroup.freeze", "1" if frozen else "0")
        return done

    def remove(self) -> None:
        remove_groups(self.paths)


def remove_groups(groups: list[Path]) -> None:
    """Kill whatever still runs in the groups (only a sandbox's processes), then remove them."""
    for group in groups:
        if not write_control(group / "cgroup.kill", "1"):  # v2 (Linux 5.14+): the kernel kills them all at once
            for pid in read_text(group / "cgroup.procs").split():
                kill(int(pid))
        write_control(group / "cgroup.freeze", "0")  # a frozen process dies only once thawed
    deadline = time.monotonic() + 5.0
    for group in groups:
        while group.exists():
            try:
                group.rmdir()
            except OSError as err:
                if err.errno != errno.EBUSY or time.monotonic() > deadline:
                    log.warning("could not remove cgroup %s: %s", group, err)
                    break
                time.sleep(0.02)


def _make_group(hierarchy: Hierarchy, name: str, spec: SandboxSpec) -> Path:
    group = hierarchy.parent / name
    group.mkdir()
    try:
        for controller in hierarchy.controllers:
            for file, value in limit_files(hierarchy.version, controller, spec):
                if file in _OPTIONAL and not (group / file).exists():
                    continue
                (group / file).write_text(value)
    except OSError:
        group.rmdir()
        raise
    return group


# -- what the host has ---------------------------------------------------------------------


@functools.cache
def host_hierarchies() -> tuple[tuple[Hierarchy, ...], tuple[str, ...]]:
    """Where this process's sandboxes get their groups, and what keeps any controller from them.
    Found once per process (a forked child shares the answer; it is in the same groups)."""
    mounts = cgroup_mounts()
    own = process_groups()
    hierarchies, problems, on_v2 = [], [], []
    for controller in CONTROLLERS:
        v1 = next((point for point, options in mounts[1] if controller in options), None)
        if v1 is not None:
            group = v1 / own.get(controller, "").lstrip("/")
            if os.access(group, os.W_OK):
                hierarchies.append(Hierarchy(1, group, (controller,)))
            else:
                problems.append(f"the cgroup v1 {controller} group {group} is not writable")
        elif mounts[2] and "" in own:
            on_v2.append(controller)
        else:
            problems.append(f"no cgroup hierarchy has the {controller} controller")
    if on_v2:
        parent, enabled, trouble = delegate(mounts[2][0][0] / own[""].lstrip("/"), on_v2)
        problems += trouble
        if enabled:
            hierarchies.append(Hierarchy(2, parent, tuple(enabled)))
    return tuple(hierarchies), tuple(problems)


def delegate(group: Path, controllers: list[str]) -> tuple[Path, list[str], list[str]]:
    """Make v2 `group` hand `controllers` to the sandbox groups made in it: (the group sandboxes
    go in, the controllers they get, why any is missing)."""
    if group.name == HOST_LEAF:
        group = group.parent  # this process was moved by an ancestor that set the group up
    available = read_text(group / "cgroup.controllers").split()
    problems = [f"the cgroup v2 {c} controller is not delegated to {group}" for c in controllers if c not in available]
    wanted = [c for c in controllers if c in available]
    if not wanted:
        return group, [], problems
    if not os.access(group / "cgroup.subtree_control", os.W_OK):
        return group, [], problems + [f"the cgroup v2 group {group} is not writable"]
    if read_text(group / "cgroup.procs").split() and (group / "cgroup.type").exists():
        # A non-root group with processes in it cannot hand domain controllers (memory) down, and
        # handing threaded ones (pids, cpu) down would make it a thread root, whose children take
        # no processes: it must be emptied first.
        others = set(read_text(group / "cgroup.procs").split()) - {str(os.getpid())}
        if others:
            problems.append(
                f"the cgroup v2 group {group} holds other processes ({len(others)}), so it cannot hand "
                f"{'/'.join(wanted)} to sandbox groups: start harness in a group of its own "
                "(e.g. `systemd-run [--user] --scope -p Delegate=yes harness ...`)"
            )
            return group, [], problems
        leaf = group / HOST_LEAF
        try:
            leaf.mkdir(exist_ok=True)
            (leaf / "cgroup.procs").write_text(str(os.getpid()))
        except OSError as err:
            return group, [], problems + [f"cannot move this process into {leaf}: {err.strerror}"]
        log.info("moved this process into %s so that %s can hand %s to sandbox groups", leaf, group, "/".join(wanted))
    enabled, failure = _enable(group, wanted)
    if failure is not None:
        problems.append(
            f"cannot enable {'/'.join(c for c in wanted if c not in enabled)} in {group}: {os.strerror(failure)}"
        )
    return group, enabled, problems


def _enable(group: Path, controllers: list[str]) -> tuple[list[str], int | None]:
    """Enable each controller in `group`'s subtree_control: (those enabled, the errno of a failure)."""
    enabled, failure = [], None
    for controller in controllers:
        if controller in read_text(group / "cgroup.subtree_control").split():
            enabled.append(controller)
            continue
        try:
            (group / "cgroup.subtree_control").write_text(f"+{controller}")
            enabled.append(controller)
        except OSError as err:
            failure = err.errno
    return enabled, failure


_warned: set[str] = set()


def warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning(message)
