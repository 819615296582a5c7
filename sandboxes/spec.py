"""What a sandbox is made from, and what a command returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class SandboxSpec:
    """Everything needed to create a sandbox. Network is off unless asked for."""

    image: str = "harness-base:latest"
    workdir: str = "/workspace"
    env: dict[str, str] = field(default_factory=dict)
    cpus: float = 1.0
    memory: str = "2g"
    pids: int = 512
    disk: str | None = None  # applied only where the storage driver supports a size
    wall_time: float = 3600.0  # seconds from start; the sandbox is dead afterwards
    network: bool = False
    user: str | None = None
    read_only: bool = False  # root filesystem read-only (workdir and /tmp stay writable)
    mounts: tuple[tuple[str, str, bool], ...] = ()  # (host path, sandbox path, read_only)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SandboxSpec":
        data = dict(data)
        data["mounts"] = tuple(tuple(m) for m in data.get("mounts", ()))
        return cls(**data)


def parse_bytes(size: str | int) -> int:
    """'512m' -> 536870912. Accepts a plain integer count of bytes too."""
    if isinstance(size, int):
        return size
    text = size.strip().lower().removesuffix("b")
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


@dataclass
class ExecResult:
    """What one command did. `output` is stdout and stderr merged, capped, decoded safely."""

    output: str
    exit_code: int
    timed_out: bool = False
    duration: float = 0.0
    truncated_bytes: int = 0  # how many bytes of output were cut from the middle
    shell_restarted: bool = False  # the shell died during the command and was started anew
    message: str = ""  # why the command ended abnormally (timeout, OOM kill, shell death)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out
