"""A persistent interactive bash session over a byte stream attached to a pseudo-terminal.

Both backends run one `bash -i` per sandbox on a pty and talk to it through a `Transport`
(Docker: the engine's exec socket; local: a pty master fd). Why a pty: the terminal's
interrupt character is the only way to stop a runaway command without killing the shell,
including loops made of shell builtins, while leaving cwd, variables, functions and
background jobs alone.

Protocol, one line per command:

    : ; { eval $'<command, ANSI-C quoted>' ; } </dev/null; printf '\\036<nonce>:%d\\036' "$?"

The command never sees the nonce (it is only in text bash has already parsed), so code under
test cannot forge the end marker. Quoting every non-printable byte keeps control characters
(^C, ^D, ^Z, ^S) out of the terminal's input, and canonical mode is off, so lines of any
length pass.
"""

from __future__ import annotations

import logging
import re
import select
import secrets
import time
from typing import Callable, Protocol

from .errors import SandboxClosed, SandboxError
from .spec import ExecResult

log = logging.getLogger(__name__)

DEFAULT_OUTPUT_CAP = 1_000_000  # bytes kept per command: half from the head, half from the tail
TIMEOUT_EXIT_CODE = 124  # what coreutils' `timeout` returns
HANGUP_EXIT_CODE = 129  # 128 + SIGHUP: what a command shows when its terminal hangs up
_SETUP = (
    "stty -echo -opost -icanon 2>/dev/null; PS1=''; PS2=''; PS0=''; PROMPT_COMMAND=''; "
    "set +o history; unset HISTFILE; export PAGER=cat GIT_PAGER=cat TERM=dumb; "
    "printf '\\036{nonce}:%d\\036' $$\n"
)
_ANY_MARKER = re.compile(rb"\x1e[0-9a-f]{16}:-?\d+\x1e")
_QUOTE_TABLE = [chr(b) if 0x20 <= b < 0x7F and b not in (0x27, 0x5C) else f"\\x{b:02x}" for b in range(256)]
_QUOTE_TABLE[0x0A] = "\\n"


def wait_readable(fd, timeout: float) -> bool:
    """True once `fd` (a descriptor or a socket) has data or EOF, False after `timeout` seconds.

    poll, not select: select() cannot watch descriptors numbered 1024 or more, which a process
    holding a few hundred sandboxes has.
    """
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(timeout, 0.0) * 1000))


class Transport(Protocol):
    """A bidirectional byte stream to a shell running on a pty."""

    def send(self, data: bytes) -> None: ...

    def recv(self, timeout: float) -> bytes | None:
        """Bytes that arrived within `timeout` (b"" if none); None once the stream has ended."""

    def kill_foreground(self, shell_pid: int) -> None:
        """SIGKILL the terminal's foreground process group, unless that is the shell itself."""

    def close(self) -> None: ...


def ansi_c_quote(command: str) -> str:
    data = command.encode("utf-8", errors="surrogateescape")
    if b"\x00" in data:
        raise SandboxError("the command contains a NUL byte, which a shell cannot run")
    return "$'" + "".join(_QUOTE_TABLE[b] for b in data) + "'"


class OutputCollector:
    """Keeps the first and last `cap/2` bytes of a stream and counts what fell in between."""

    def __init__(self, cap: int):
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data
        excess = len(self.tail) - self.half
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="backslashreplace")
        tail = self.tail.decode("utf-8", errors="backslashreplace")
        if self.dropped:
            return f"{head}\n[... {self.dropped} bytes of output truncated ...]\n{tail}"
        return head + tail


class _MarkerReader:
    """Feeds stream bytes to a collector until `\\036<nonce>:<int>\\036` shows up."""

    def __init__(self, nonce: str, collector: OutputCollector | None):
        self.pattern = re.compile(b"\x1e" + nonce.encode() + rb":(-?\d+)\x1e")
        self.keep = len(nonce) + 16  # bytes held back in case a marker straddles two chunks
        self.collector = collector
        self.pending = b""
        self.value: int | None = None

    def feed(self, chunk: bytes) -> bool:
        self.pending += chunk
        match = self.pattern.search(self.pending)
        if match:
            self._emit(self.pending[: match.start()])
            self.value = int(match.group(1))
            self.pending = b""
            return True
        cut = max(len(self.pending) - self.keep, 0)
        opening = self.pending.rfind(b"\x1e", max(cut - self.keep, 0), cut)
        if opening >= 0:
            cut = opening  # a stale marker may start there: keep it whole for _emit to drop
        self._emit(self.pending[:cut])
        self.pending = self.pending[cut:]
        return False

    def flush(self) -> None:
        self._emit(self.pending)
        self.pending = b""

    def _emit(self, data: bytes) -> None:
        """Pass output on, minus markers of earlier commands cut short by a timeout."""
        if self.collector is not None and data:
            self.collector.add(_ANY_MARKER.sub(b"", data) if b"\x1e" in data else data)


class ShellSession:
    """Runs commands one at a time in a long-lived bash; restarts it if it dies."""

    def __init__(
        self,
        open_transport: Callable[[], Transport],
        output_cap: int | None = None,  # None: DEFAULT_OUTPUT_CAP
        is_alive: Callable[[], bool] = lambda: True,
        start_timeout: float = 20.0,
    ):
        self._open_transport = open_transport
        self._is_alive = is_alive  # whether the machine under the shell still runs
        self.output_cap = DEFAULT_OUTPUT_CAP if output_cap is None else output_cap
        self.start_timeout = start_timeout
        self.transport: Transport | None = None
        self.pid = 0
        self.restarts = 0
        self.start()

    def start(self) -> None:
        self.transport = self._open_transport()
        nonce = secrets.token_hex(8)
        self.transport.send(_SETUP.format(nonce=nonce).encode())
        try:
            self.pid = self._wait_marker(nonce, None, time.monotonic() + self.start_timeout)
        except _ShellDied:
            self.close()
            if self._stays_alive():  # the sandbox runs on, but no shell can (e.g. its pids are all taken)
                raise SandboxError("a new shell died at once") from None
            raise SandboxClosed("a new shell died at once: the sandbox is gone") from None
        if self.pid is None:
            self.close()
            raise SandboxError(f"the shell did not start within {self.start_timeout:.0f}s")

    def exec(self, command: str, timeout: float) -> ExecResult:
        if self.transport is None:
            raise SandboxClosed("the shell session is closed")
        started = time.monotonic()
        self._drain()
        nonce = secrets.token_hex(8)
        # The leading `: ;`: after an eval that ends inside a quote (`echo 'x`), interactive bash 5.2 no longer
        # takes a `{` at the start of the next line as a reserved word, so that line would be a syntax error and
        # its marker never come (the command after it would hang until its timeout).
        line = f": ; {{ eval {ansi_c_quote(command)} ; }} </dev/null; printf '\\036{nonce}:%d\\036' \"$?\"\n"
        collector = OutputCollector(self.output_cap)
        self.transport.send(line.encode())
        try:
            exit_code = self._wait_marker(nonce, collector, started + timeout)
        except _ShellDied:
            return self._after_death(collector, started)
        if exit_code is not None:
            if exit_code == HANGUP_EXIT_CODE:
                # A sandbox killed from outside hangs up the terminal first: the command dies of
                # SIGHUP and bash may still report it before the kill reaches bash itself.
                self._raise_if_gone()
            return self._result(collector, exit_code, started)
        return self._after_timeout(collector, started, timeout)

    def close(self) -> None:
        if self.transport is not None:
            try:
                self.transport.close()
            finally:
                self.transport = None

    # -- the ways a command ends besides normally -------------------------------------------

    def _after_timeout(self, collector: OutputCollector, started: float, timeout: float) -> ExecResult:
        message = f"the command timed out after {timeout:.1f}s and was interrupted"
        try:
            self.transport.send(b"\x03")  # SIGINT to the foreground job, as Ctrl-C would
            if not self._resync(collector, grace=2.0):
                self.transport.kill_foreground(self.pid)
                if not self._resync(collector, grace=3.0):
                    raise _ShellDied
                message += " (it ignored SIGINT and was killed)"
        except _ShellDied:
            result = self._after_death(collector, started)
            result.timed_out = True
            result.exit_code = TIMEOUT_EXIT_CODE
            result.message = message + "; " + result.message
            return result
        result = self._result(collector, TIMEOUT_EXIT_CODE, started)
        result.timed_out = True
        result.message = message
        return result

    def _stays_alive(self, grace_s: float = 3.0) -> bool:
        """Whether the machine under the shell still runs after a grace period: one killed from outside can
        report itself running for a moment after its shell died."""
        deadline = time.monotonic() + grace_s
        while self._is_alive():
            if time.monotonic() > deadline:
                return True
            time.sleep(0.1)
        return False

    def _raise_if_gone(self) -> None:
        if not self._is_alive():
            self.close()
            raise SandboxClosed("the sandbox died (killed from outside, or out of memory)")

    def _after_death(self, collector: OutputCollector, started: float) -> ExecResult:
        self.close()
        self._raise_if_gone()
        self.restarts += 1
        try:
            self.start()
        except SandboxClosed:
            raise
        except SandboxError as err:
            raise SandboxError(
                f"the shell died and could not be restarted ({err}); the sandbox may have hit its pids limit"
            ) from None
        result = self._result(collector, -1, started)
        result.shell_restarted = True
        result.message = "the shell exited during the command and was restarted: cwd, variables and jobs were reset"
        return result

    def _resync(self, collector: OutputCollector, grace: float) -> bool:
        nonce = secrets.token_hex(8)
        self.transport.send(f"\nprintf '\\036{nonce}:0\\036'\n".encode())
        return self._wait_marker(nonce, collector, time.monotonic() + grace) is not None

    # -- stream plumbing ---------------------------------------------------------------------

    def _wait_marker(self, nonce: str, collector: OutputCollector | None, deadline: float) -> int | None:
        reader = _MarkerReader(nonce, collector)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                reader.flush()
                return None
            chunk = self.transport.recv(min(remaining, 1.0))
            if chunk is None:
                reader.flush()
                raise _ShellDied
            if chunk and reader.feed(chunk):
                return reader.value

    def _drain(self) -> None:
        """Discard stray bytes (job notices, output of background jobs) before a command."""
        while True:
            chunk = self.transport.recv(0)
            if not chunk:
                if chunk is None:
                    self._raise_if_gone()
                    log.warning("the shell had exited between commands; starting a new one")
                    self.close()
                    self.restarts += 1
                    self.start()
                return

    def _result(self, collector: OutputCollector, exit_code: int, started: float) -> ExecResult:
        return ExecResult(
            output=collector.text(),
            exit_code=exit_code,
            duration=time.monotonic() - started,
            truncated_bytes=collector.dropped,
        )


class _ShellDied(Exception):
    pass
