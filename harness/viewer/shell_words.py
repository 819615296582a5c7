"""What a shell command line writes to, read from its words rather than by one regular expression.

A single pattern over a whole command backtracks without end on real agents' long `sed -i ... &&`
chains; the words of each simple command (quotes honoured by `shlex`) say plainly which paths a
redirection, `tee`, `sed -i`, `cp`, `mv`, `truncate` or `rm` touches.
"""

from __future__ import annotations

import re
import shlex
from typing import NamedTuple

HEREDOC = re.compile(r"(?<!<)<<(?!<)-?\s*(['\"]?)(\w+)\1")
SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")", ";;", "|&"}
REDIRECTS = {">", ">>", ">|", "&>", "&>>"}
PREFIXES = {"sudo", "env", "command", "time", "nohup", "exec"}


class Write(NamedTuple):
    path: str
    removes: bool  # `rm` / `unlink`: the path is deleted, not written
    evidence: str


def split_heredocs(command: str) -> tuple[str, str]:
    """(the lines this shell runs, the here-documents' bodies: data fed to a command, not run by this shell)."""
    shell, bodies, ends = [], [], []
    for line in command.split("\n"):
        if ends:
            if line.strip() == ends[0]:
                ends.pop(0)
            else:
                bodies.append(line)
            continue
        shell.append(line)
        ends = [match.group(2) for match in HEREDOC.finditer(line)]
    return "\n".join(shell), "\n".join(bodies)


def simple_commands(shell: str) -> list[list[str]]:
    """The words of each simple command of `shell` (here-document bodies already removed)."""
    commands: list[list[str]] = []
    for line in shell.replace("\\\n", " ").split("\n"):
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split, lexer.commenters = True, ""
        try:
            words = list(lexer)
        except ValueError:  # an unclosed quote: the plain words still name the paths
            words = line.split()
        current: list[str] = []
        for word in words + [";"]:
            if word in SEPARATORS:
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(word)
    return commands


def shell_writes(shell: str) -> list[Write]:
    """Every path the commands of `shell` write, move, truncate or remove."""
    writes = []
    for words in simple_commands(shell):
        evidence = " ".join(words)[:200]
        args = []
        skip = False
        for i, word in enumerate(words):
            if skip:
                skip = False
            elif word in REDIRECTS and i + 1 < len(words):
                writes.append(Write(words[i + 1], False, evidence))
                skip = True
            elif not word.startswith("<") and not word.startswith(">"):
                args.append(word)
        while args and (args[0] in PREFIXES or re.fullmatch(r"\w+=.*", args[0])):
            args.pop(0)
        if not args:
            continue
        program, rest = args[0].rsplit("/", 1)[-1], args[1:]
        operands = [a for a in rest if not a.startswith("-")]
        if program in ("rm", "unlink"):
            writes += [Write(path, True, evidence) for path in operands]
        elif program in ("tee", "mv", "truncate"):
            writes += [Write(path, False, evidence) for path in operands if not re.fullmatch(r"[+-]?\d+[KMG]?", path)]
        elif program == "cp" and len(operands) >= 2:
            writes.append(Write(operands[-1], False, evidence))
        elif program == "sed" and any(_in_place(a) for a in rest):
            scripted = any(a in ("-e", "-f") or a.startswith("--expression") for a in rest)
            writes += [Write(path, False, evidence) for path in (operands if scripted else operands[1:])]
    return writes


def _in_place(argument: str) -> bool:
    return argument.startswith("--in-place") or (
        argument.startswith("-") and not argument.startswith("--") and "i" in argument[1:]
    )
