"""HTML pieces of a trajectory: turns, tool calls, observations, the patch as a diff, the grading report, tokens."""

from __future__ import annotations

import functools
import json
import math
import re
from html import escape
from typing import Any

from .audit import Flag

TRUNCATION = re.compile(r"\[\.\.\. \d+ characters truncated \.\.\.\]")
MAX_TOKENS_SHOWN = 20_000


def e(value: Any) -> str:
    return escape(str(value), quote=True)


def pre(text: str, css: str = "") -> str:
    """Escaped text in <pre>, the observation truncation markers highlighted."""
    parts, last = [], 0
    for match in TRUNCATION.finditer(text):
        parts += [e(text[last : match.start()]), f'<mark class="trunc">{e(match.group(0))}</mark>']
        last = match.end()
    parts.append(e(text[last:]))
    return f'<pre class="{css}">{"".join(parts)}</pre>'


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 1000 else f"{value:.0f}"
    return e(value)


def key_values(pairs: list[tuple[str, Any]], css: str = "kv") -> str:
    return (
        f'<table class="{css}">' + "".join(f"<tr><th>{e(k)}</th><td>{fmt(v)}</td></tr>" for k, v in pairs) + "</table>"
    )


def chips(pairs: list[tuple[str, Any]]) -> str:
    return '<div class="chips">' + "".join(f"<span><i>{e(k)}</i> <b>{fmt(v)}</b></span>" for k, v in pairs) + "</div>"


def diff(patch: str) -> str:
    """The patch, highlighted by Pygments' diff lexer."""
    if not patch.strip():
        return '<p class="muted">no patch</p>'
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import DiffLexer

    return '<div class="diff">' + highlight(patch, DiffLexer(), HtmlFormatter(cssclass="highlight")) + "</div>"


def pygments_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="default").get_style_defs(".highlight")


def _arguments(name: str, arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return pre(arguments, "args")
    if isinstance(arguments, dict) and set(arguments) <= {"command"} and name in ("bash", "python"):
        return pre(str(arguments.get("command", "")), "cmd")
    if isinstance(arguments, dict) and name == "python" and "code" in arguments:
        return pre(str(arguments["code"]), "cmd")
    return pre(json.dumps(arguments, indent=1, ensure_ascii=False), "args")


def messages(trajectory: dict[str, Any], flags: list[Flag], prefix: str = "m") -> str:
    """Each message in order; assistant turns carry their number, timings, token counts and finish reason."""
    stats = (trajectory.get("metadata") or {}).get("turn_stats") or []
    flagged: dict[int, list[Flag]] = {}
    for flag in flags:
        flagged.setdefault(flag.message, []).append(flag)
    out, turn = [], 0
    for number, message in enumerate(trajectory.get("messages") or []):
        role = str(message.get("role", "?"))
        head = [f'<span class="role">{e(role)}</span>']
        if role == "assistant":
            turn += 1
            head.append(f'<span class="turn">turn {turn}</span>')
            if turn <= len(stats):
                s = stats[turn - 1]
                head.append(
                    f'<span class="stat">model {s.get("policy_s", 0):.2f}s · tools {s.get("env_s", 0):.2f}s · '
                    f"{s.get('prompt_tokens', 0)} prompt / {s.get('completion_tokens', 0)} completion tokens · "
                    f"finish {e(s.get('finish_reason') or '?')}</span>"
                )
                if s.get("finish_reason") == "length":  # the reply was cut: its tool call may be broken by that alone
                    head.append(
                        '<span class="flag" title="the reply reached max_tokens and was cut">cut at max_tokens</span>'
                    )
        if role == "tool" and message.get("name"):
            head.append(f'<span class="stat">{e(message["name"])}</span>')
        for flag in flagged.get(number, []):
            head.append(f'<span class="flag" title="{e(flag.evidence)}">{e(flag.kind)}</span>')
        body = []
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        if content:
            text = pre(str(content), "content")
            body.append(
                f"<details><summary>{len(content)} characters</summary>{text}</details>" if role == "system" else text
            )
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            name = function.get("name", "?")
            body.append(
                f'<div class="call"><span class="callname">{e(name)}</span>{_arguments(name, function.get("arguments", ""))}</div>'
            )
        out.append(
            f'<div class="msg {e(role)}" id="{prefix}{number}"><div class="head">{" ".join(head)}</div>{"".join(body)}</div>'
        )
    return "".join(out)


def grading(details: dict[str, Any] | None) -> str:
    """The grading report: FAIL_TO_PASS / PASS_TO_PASS per test, untrusted logs, patch-policy refusals."""
    if not details:
        return '<p class="muted">no grading details</p>'
    parts = []
    notes = [
        (k, details[k])
        for k in (
            "verdict",
            "grading_mode",
            "resolution",
            "resolved",
            "reward",
            "patch_exists",
            "patch_successfully_applied",
            "apply_method",
            "test_exit_code",
            "duration",
        )
        if k in details
    ]
    if notes:
        parts.append(key_values(notes))
    for label, key in (("patch refused", "rejected"), ("log not trusted", "invalid_log"), ("error", "error")):
        value = details.get(key)
        if value:
            value = "; ".join(value) if isinstance(value, list) else value
            parts.append(f'<p class="bad"><b>{e(label)}:</b> {e(value)}</p>')
    if details.get("neutralized"):
        parts.append(
            '<p class="muted"><b>neutralized</b> (put back as at the base commit before the tests ran): '
            + e("; ".join(details["neutralized"]))
            + "</p>"
        )
    for group, outcome in (details.get("tests_status") or {}).items():
        rows = [(t, "pass") for t in outcome.get("success", [])] + [(t, "fail") for t in outcome.get("failure", [])]
        parts.append(
            f"<h4>{e(group)} ({len(outcome.get('success', []))} of {len(rows)} pass)</h4>"
            '<table class="tests">'
            + "".join(f'<tr class="{v}"><td>{v}</td><td>{e(t)}</td></tr>' for t, v in rows)
            + "</table>"
        )
    rest = {
        k: v
        for k, v in details.items()
        if k not in {n for n, _ in notes} | {"rejected", "invalid_log", "error", "tests_status", "neutralized"}
    }
    if rest:
        parts.append(pre(json.dumps(rest, indent=1, ensure_ascii=False), "args"))
    return "".join(parts)


@functools.lru_cache(maxsize=4)
def _tokenizer(path: str):
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path)
    except Exception:  # noqa: BLE001 - any checkpoint that does not load: token ids are shown instead
        return None


def tokens(trajectory: dict[str, Any], tokenizer_path: str | None) -> str:
    """Each token with its loss mask (policy tokens tinted by probability) and logprob on hover."""
    ids = trajectory.get("token_ids")
    if not ids:
        return '<p class="muted">no token record (only in-process models keep one)</p>'
    mask = trajectory.get("loss_mask") or [0] * len(ids)
    logprobs = trajectory.get("logprobs") or [0.0] * len(ids)
    tokenizer = _tokenizer(tokenizer_path) if tokenizer_path else None
    shown = ids[:MAX_TOKENS_SHOWN]
    pieces = tokenizer.batch_decode([[i] for i in shown]) if tokenizer is not None else [f"[{i}]" for i in shown]
    spans = []
    for i, (token, piece) in enumerate(zip(shown, pieces)):
        if i < len(mask) and mask[i]:
            p = math.exp(logprobs[i]) if i < len(logprobs) else 0.0
            style = f' style="background:hsl({int(120 * p)},70%,80%)"'
            title = f"id {token} · mask 1 · logprob {logprobs[i]:.3f} (p={p:.2f})"
            css = "tok pol"
        else:
            style, title, css = "", f"id {token} · mask 0", "tok ctx"
        spans.append(f'<span class="{css}"{style} title="{e(title)}">{e(piece)}</span>')
    policy = sum(mask)
    legend = (
        f"<p>{len(ids)} tokens, {policy} with loss mask 1 (tinted from red, p=0, to green, p=1; hover for the "
        f"logprob), {len(ids) - policy} with mask 0 (grey)."
        + ("" if tokenizer is not None else " The tokenizer did not load: token ids are shown.")
        + (f" First {MAX_TOKENS_SHOWN} shown." if len(ids) > MAX_TOKENS_SHOWN else "")
        + "</p>"
    )
    return legend + f'<div class="tokens">{"".join(spans)}</div>'


def flags_list(flags: list[Flag], prefix: str = "m") -> str:
    if not flags:
        return '<p class="muted">no audit flags</p>'
    items = "".join(
        f'<li><span class="flag">{e(f.kind)}</span> <a href="#{prefix}{f.message}">'
        f"{'patch' if f.message < 0 else f'message {f.message}'}</a>: <code>{e(f.evidence)}</code></li>"
        for f in flags
    )
    return f'<ul class="flags">{items}</ul>'
