"""The host's cgroup file systems as files: where each hierarchy is mounted, which groups a process is in, and
writing a group's control files. The bubblewrap backends' own groups (`sandboxes/local/cgroups.py`) and the
Docker-API backends' freezing of a container's group both read them here."""

from __future__ import annotations

from pathlib import Path


def read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def cgroup_mounts() -> dict[int, list[tuple[Path, set[str]]]]:
    """{1: [(mount point, its controllers)], 2: [(mount point, set())]} from /proc/self/mountinfo.
    A mount whose root is not the hierarchy's root (a bind mount) is skipped."""
    mounts: dict[int, list[tuple[Path, set[str]]]] = {1: [], 2: []}
    for line in read_text(Path("/proc/self/mountinfo")).splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5 or fields[3] != "/":
            continue
        fstype, _, options = line.split(" - ", 1)[1].split()[:3]
        if fstype == "cgroup2":
            mounts[2].append((Path(fields[4]), set()))
        elif fstype == "cgroup":
            mounts[1].append((Path(fields[4]), set(options.split(","))))
    return mounts


def process_groups(pid: int | str = "self") -> dict[str, str]:
    """A process's group per v1 controller, and under "" its v2 group (/proc/<pid>/cgroup)."""
    own = {}
    for line in read_text(Path(f"/proc/{pid}/cgroup")).splitlines():
        hierarchy_id, controllers, path = line.split(":", 2)
        if hierarchy_id == "0" and not controllers:
            own[""] = path
        for controller in controllers.split(","):
            if controller:
                own[controller] = path
    return own


def freezer_file(pid: int) -> tuple[Path, str] | None:
    """The file that freezes the cgroup of process `pid` (a container's first process: Docker and
    Podman lay their groups out differently), with the value that freezes it; None if not found."""
    groups, mounts = process_groups(pid), cgroup_mounts()
    for mount, controllers in mounts[1]:
        if "freezer" in controllers and "freezer" in groups:
            return mount / groups["freezer"].lstrip("/") / "freezer.state", "FROZEN"
    for mount, _ in mounts[2]:
        if "" in groups:
            return mount / groups[""].lstrip("/") / "cgroup.freeze", "1"
    return None


def write_control(path: Path, value: str) -> bool:
    """Write a cgroup control file; whether it took."""
    try:
        path.write_text(value)
        return True
    except OSError:
        return False
