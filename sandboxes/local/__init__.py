"""Local backend: one bubblewrap sandbox per Sandbox, for machines without Docker.

A sandbox is a bwrap process tree in its own pid, ipc, uts and (unless asked) network
namespaces, over a read-only root filesystem, with two writable host directories bound in:
`<cache>/local/<id>/workspace` at the workdir and `<cache>/local/<id>/tmp` at /tmp. Its shell
is `bash -i` on a pty whose master this process holds (`process`). Memory, pids and cpu are
limited by cgroup v1 or v2 groups `harness-<id>` nested in this process's own groups
(`cgroups`; RLIMIT_AS for memory, with a warning, where no group can be made). Files move
through the sandbox's own view of its filesystem (`files`: `/proc/<pid>/root` opened with
RESOLVE_IN_ROOT), so symlinks planted by the agent resolve inside the sandbox and never reach
the host.

What differs from Docker: the root filesystem is always read-only (only the workdir, /tmp and
read-write mounts take writes); `spec.disk` is enforced by a watchdog on the workspace and /tmp
folders (`sandboxes.disk`; read-write mounts are the caller's); `spec.user` is a numeric
`uid[:gid]` or a name from the root filesystem's /etc/passwd, run in a user namespace that
maps it onto this process's uid; a workdir or mount point must exist in the root filesystem
unless it sits directly under /.
"""

from .sandbox import BWRAP_HINT, LocalBackend, LocalSandbox

__all__ = ["BWRAP_HINT", "LocalBackend", "LocalSandbox"]
