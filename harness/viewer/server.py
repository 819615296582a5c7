"""`harness view`: the web app, on the standard library's threading HTTP server.

Pages are rendered here as plain HTML; the run table is filled by static/app.js from the JSON rows API
(sorted, filtered and paged on the server, so a 10,000-episode run sends 100 rows at a time).
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, quote, urlparse

from ..evaluate import pass_at_k
from . import plots, render
from .audit import audit
from .render import e, key_values
from .runs import Run, ViewerError
from .search import compile_query, search

STATIC = Path(__file__).parent / "static"
PAGE_SIZE = 100
SORTABLE = ("index", "task_id", "sample", "resolved", "reward", "exit_status", "turns", "tokens", "wall_s", "error")


def page(title: str, body: str) -> bytes:
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{e(title)} · harness view</title>'
        '<link rel="stylesheet" href="/static/style.css"><link rel="stylesheet" href="/static/pygments.css">'
        '<script src="/static/app.js" defer></script></head><body>'
        '<nav><a href="/">runs</a> <form action="/search" method="get" class="navsearch">'
        '<input name="q" placeholder="search messages and tool calls" id="navq"> '
        '<label><input type="checkbox" name="regex" value="1"> regex</label> <button>search</button></form></nav>'
        f"<main><h1>{e(title)}</h1>{body}</main></body></html>"
    ).encode()


# -- statistics of a run's rows -------------------------------------------------------------------


def mean(values) -> float:
    """Float mean (statistics.mean is exact, and ten times slower on a 10,000-row run)."""
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def summary(rows: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    if not rows:
        return [("episodes", 0)]
    by_task: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_task[row["task_id"]].append(row)
    samples = min(len(r) for r in by_task.values())
    pairs: list[tuple[str, Any]] = [
        ("episodes", len(rows)),
        ("tasks", len(by_task)),
        ("resolve rate", f"{mean(r['resolved'] for r in rows):.1%}"),
        ("mean reward", mean(r["reward"] for r in rows)),
    ]
    for k in sorted({1, samples}):
        pairs.append((f"pass@{k}", mean(pass_at_k(len(r), sum(x["resolved"] for x in r), k) for r in by_task.values())))
    pairs += [
        ("mean turns", mean(r["turns"] for r in rows)),
        ("tokens", sum(r["tokens"] for r in rows)),
        ("mean wall time (s)", mean(r["wall_s"] for r in rows)),
        (
            "exit statuses",
            ", ".join(f"{k or '?'} {v}" for k, v in Counter(r["exit_status"] for r in rows).most_common()),
        ),
        ("with errors", sum(bool(r["error"]) for r in rows)),
    ]
    return pairs


def select(rows: list[dict[str, Any]], query: dict[str, str]) -> list[dict[str, Any]]:
    """The rows API's filters: text in task id or error, resolved, exit status, reward and turn ranges."""
    text = query.get("q", "").lower()
    resolved = query.get("resolved", "")
    status = query.get("status", "")
    bounds = {}
    for key in ("min_reward", "max_reward", "min_turns", "max_turns"):
        if query.get(key, "") != "":
            try:
                bounds[key] = float(query[key])
            except ValueError:
                raise ViewerError(f"{key} must be a number, not {query[key]!r}") from None
    out = []
    for row in rows:
        if text and text not in row["task_id"].lower() and text not in row["error"].lower():
            continue
        if resolved and row["resolved"] != (resolved == "yes"):
            continue
        if status and row["exit_status"] != status:
            continue
        if bounds.get("min_reward", -1e18) > row["reward"] or bounds.get("max_reward", 1e18) < row["reward"]:
            continue
        if bounds.get("min_turns", -1e18) > row["turns"] or bounds.get("max_turns", 1e18) < row["turns"]:
            continue
        out.append(row)
    return out


# -- the application ------------------------------------------------------------------------------


class Viewer:
    """The loaded runs and every page and API answer; the HTTP handler only routes to it."""

    def __init__(self, runs: list[Run]):
        if not runs:
            raise ViewerError("give at least one run directory")
        self.runs = runs
        self._plots: dict[tuple, bytes] = {}
        self._lock = threading.Lock()

    def run(self, number: str | int) -> Run:
        try:
            return self.runs[int(number)]
        except (ValueError, IndexError):
            raise ViewerError(f"no run {number!r}: {len(self.runs)} run(s) are loaded") from None

    @staticmethod
    def _step(query: dict[str, str]) -> int | None:
        try:
            return int(query["step"]) if query.get("step") else None
        except ValueError:
            raise ViewerError(f"step must be a number, not {query['step']!r}") from None

    # pages

    def index(self, query: dict[str, str]) -> bytes:
        items = []
        for number, run in enumerate(self.runs):
            size = (
                f"{len(run.metrics())} metric rows, rollouts of {len(run.steps())} steps"
                if run.kind == "train"
                else f"{len(run.rows())} rows"
            )
            items.append(
                f'<tr><td><a href="/run/{number}">{e(run.name)}</a></td><td>{run.kind}</td><td>{size}</td>'
                f'<td class="muted">{e(run.path)}</td><td><a href="/run/{number}/audit">audit</a></td></tr>'
            )
        options = "".join(
            f'<option value="{n}">{e(r.name)}</option>' for n, r in enumerate(self.runs) if r.kind != "train"
        )
        compare = (
            (
                f'<h2>Compare two runs</h2><form action="/compare" method="get" id="compareform">A <select name="a">{options}</select> '
                f'B <select name="b">{options}</select> <button>compare</button></form>'
            )
            if len(self.runs) > 1
            else ""
        )
        body = (
            '<table class="grid"><tr><th>run</th><th>kind</th><th>size</th><th>path</th><th></th></tr>'
            + "".join(items)
            + "</table>"
            + compare
        )
        return page("Runs", body)

    def run_page(self, number: str, query: dict[str, str]) -> bytes:
        run = self.run(number)
        if run.kind == "train":
            return self.train_page(number, run, query)
        rows = run.rows()
        config = run.config()
        body = (
            f'<p class="muted">{e(run.kind)} run in {e(run.path)}'
            + (
                f" · checkpoint <code>{e(config.get('checkpoint', ''))}</code> on <code>{e(config.get('tasks', ''))}</code>"
                if config
                else ""
            )
            + f' · <a href="/run/{number}/audit">audit flags</a></p>'
            + f'<div class="cols"><div id="summary">{key_values(summary(rows))}</div>'
            + f'<img class="plot" id="overviewplot" alt="distributions" data-src="/plot/{number}/overview.svg?n={len(rows)}"></div>'
            + self._table(number, None)
        )
        return page(run.name, body)

    def train_page(self, number: str, run: Run, query: dict[str, str]) -> bytes:
        metrics = run.metrics()
        steps = run.steps()
        step = self._step(query) or (steps[-1] if steps else None)
        last = {k: v for k, v in (metrics[-1] if metrics else {}).items() if isinstance(v, (int, float))}
        options = "".join(f'<option value="{s}"{" selected" if s == step else ""}>{s}</option>' for s in steps)
        body = (
            f'<p class="muted">training run in {e(run.path)} · {len(metrics)} metric rows · '
            f'<a href="/run/{number}/audit">audit flags</a></p>'
            f'<img class="plot" id="curves" alt="training curves" src="/plot/{number}/curves.svg?n={len(metrics)}">'
            f"<details><summary>last metrics (step {last.get('step', '-')})</summary>{key_values(sorted(last.items()))}</details>"
        )
        if steps:
            body += (
                f'<h2>Sampled trajectories of step <form method="get" style="display:inline"><select name="step" id="stepselect" '
                f'onchange="this.form.submit()">{options}</select></form></h2>'
                f'<div id="summary">{key_values(summary(run.rows(step)))}</div>' + self._table(number, step)
            )
        else:
            body += '<p class="muted">no sampled trajectories saved (rollouts/step_*.jsonl)</p>'
        return page(run.name, body)

    def _table(self, number: str, step: int | None) -> str:
        return (
            f'<div id="runtable" data-run="{number}" data-step="{"" if step is None else step}">'
            '<form class="filters" id="filters" onsubmit="return false">'
            '<input name="q" placeholder="task id or error" size="24"> '
            'resolved <select name="resolved"><option value="">any</option><option>yes</option><option>no</option></select> '
            'exit <select name="status"><option value="">any</option></select> '
            'reward <input name="min_reward" size="4" placeholder="min"> <input name="max_reward" size="4" placeholder="max"> '
            'turns <input name="min_turns" size="4" placeholder="min"> <input name="max_turns" size="4" placeholder="max"> '
            '<span id="count" class="muted"></span> <button type="button" id="prev">&lt;</button>'
            '<span id="pageinfo"></span><button type="button" id="next">&gt;</button></form>'
            '<table class="grid sortable" id="rows"><thead><tr>'
            + "".join(f'<th data-key="{k}">{k}</th>' for k in SORTABLE)
            + "</tr></thead><tbody></tbody></table></div>"
        )

    def trajectory_page(self, number: str, index: str, query: dict[str, str]) -> bytes:
        run = self.run(number)
        step = self._step(query)
        title = f"{run.name} · " + (f"step {step} · " if step is not None else "")
        body, name = self._trajectory(run, int(index), step, "m")
        return page(title + name, body)

    def _trajectory(self, run: Run, index: int, step: int | None, prefix: str) -> tuple[str, str]:
        record = run.record(index, step)
        trajectory = run.trajectory(index, step)
        if trajectory is None:  # a grading run: the report is all there is
            name = record.get("instance_id", str(index))
            return "<h2>Grading report</h2>" + render.grading(record), name
        flags = audit(trajectory)
        timings = trajectory.get("timings") or {}
        name = f"{trajectory.get('task_id')} · sample {trajectory.get('sample', 0)}"
        head = render.chips(
            [
                ("task", trajectory.get("task_id")),
                ("sample", trajectory.get("sample", 0)),
                ("policy", trajectory.get("policy")),
                ("reward", trajectory.get("reward")),
                ("exit status", trajectory.get("exit_status")),
                ("error", trajectory.get("error") or "-"),
                ("turns", trajectory.get("turns")),
                ("prompt tokens", trajectory.get("prompt_tokens")),
                ("completion tokens", trajectory.get("completion_tokens")),
                *[(k, v) for k, v in timings.items()],
            ]
        )
        tokenizer = self._tokenizer_path(run, trajectory)
        jump = " · ".join(f'<a href="#{prefix}-{k}">{k}</a>' for k in ("turns", "patch", "grading", "tokens"))
        body = (
            f'<div class="traj"><p class="jump">{jump}</p>{head}<h2>Audit flags</h2>{render.flags_list(flags, prefix)}'
            f'<h2 id="{prefix}-turns">Turns</h2><div class="messages">{render.messages(trajectory, flags, prefix)}</div>'
            f'<h2 id="{prefix}-patch">Patch</h2>{render.diff(trajectory.get("model_patch") or "")}'
            f'<h2 id="{prefix}-grading">Grading report</h2>{render.grading(trajectory.get("reward_details"))}'
            f'<h2 id="{prefix}-tokens">Tokens</h2>{render.tokens(trajectory, tokenizer)}</div>'
        )
        return body, name

    @staticmethod
    def _tokenizer_path(run: Run, trajectory: dict[str, Any]) -> str | None:
        if not trajectory.get("token_ids"):
            return None
        config = run.config()
        candidates = [
            ((config.get("trainer") or {}).get("policy") or {}).get("model", {}).get("path")
            if run.kind == "train"
            else config.get("checkpoint"),
            trajectory.get("policy"),
            *sorted((run.path / "checkpoints").glob("global_step_*"), reverse=True),
        ]
        for candidate in candidates:
            if candidate and (Path(candidate) / "tokenizer_config.json").exists():
                return str(candidate)
        return None

    def audit_page(self, number: str, query: dict[str, str]) -> bytes:
        run = self.run(number)
        kinds: Counter = Counter()
        rows, scanned = [], 0
        for step, index, trajectory in run.all_trajectories():
            scanned += 1
            flags = audit(trajectory)
            kinds.update({f.kind for f in flags})
            if flags:
                link = f"/run/{number}/t/{index}" + (f"?step={step}" if step is not None else "")
                rows.append(
                    f'<tr><td><a href="{link}">{e(trajectory.get("task_id"))} · {trajectory.get("sample", 0)}</a></td>'
                    f"<td>{'' if step is None else step}</td><td>{render.flags_list(flags, link + '#m')}</td></tr>"
                )
        body = (
            f"<p>{scanned} trajectories scanned; flagged: {len(rows)} "
            f"({', '.join(f'{k} {v}' for k, v in kinds.most_common()) or 'none'})</p>"
            '<table class="grid" id="auditrows"><tr><th>trajectory</th><th>step</th><th>flags</th></tr>'
            + "".join(rows)
            + "</table>"
        )
        return page(f"{run.name} · audit flags", body)

    def compare_page(self, query: dict[str, str]) -> bytes:
        a, b = self.run(query.get("a", "0")), self.run(query.get("b", "1"))
        by_task: dict[str, dict[str, list[bool]]] = defaultdict(lambda: {"a": [], "b": []})
        for side, run in (("a", a), ("b", b)):
            for row in run.rows():
                by_task[row["task_id"]][side].append(row["resolved"])
        lines, flips = [], Counter()
        for task, sides in sorted(by_task.items()):
            ra = mean(sides["a"]) if sides["a"] else None
            rb = mean(sides["b"]) if sides["b"] else None
            if ra is None or rb is None:
                change = "only in A" if rb is None else "only in B"
            else:
                change = "fixed" if rb > ra else "broken" if rb < ra else "same"
            flips[change] += 1
            link = f"/compare/task?a={query.get('a', '0')}&b={query.get('b', '1')}&task={quote(task)}"
            show = lambda r: "-" if r is None else f"{r:.0%}"  # noqa: E731
            lines.append(
                f'<tr class="{change.replace(" ", "-")}" data-change="{change}"><td><a href="{link}">{e(task)}</a></td>'
                f"<td>{show(ra)}</td><td>{show(rb)}</td><td>{change}</td></tr>"
            )
        body = (
            f"<p>A: <b>{e(a.name)}</b> ({e(a.path)})<br>B: <b>{e(b.name)}</b> ({e(b.path)})</p>"
            f'<p id="flipcounts">flipped: {flips["fixed"]} fixed in B, {flips["broken"]} broken in B; '
            f"{flips['same']} unchanged; {flips['only in A']} only in A, {flips['only in B']} only in B</p>"
            '<label><input type="checkbox" id="onlyflipped"> only flipped tasks</label>'
            '<table class="grid" id="comparerows"><tr><th>task</th><th>A resolved</th><th>B resolved</th><th>change</th></tr>'
            + "".join(lines)
            + "</table>"
        )
        return page("Compare", body)

    def compare_task_page(self, query: dict[str, str]) -> bytes:
        task, sample = query.get("task", ""), int(query.get("sample", "0") or 0)
        columns = []
        for side in ("a", "b"):
            run = self.run(query.get(side, "0" if side == "a" else "1"))
            match = [r for r in run.rows() if r["task_id"] == task and r["sample"] == sample]
            if match:
                html, _ = self._trajectory(run, match[0]["index"], None, f"{side}m")
            else:
                html = f'<p class="muted">{e(run.name)} has no sample {sample} of {e(task)}</p>'
            columns.append(f'<div class="side" id="side{side}"><h2>{side.upper()}: {e(run.name)}</h2>{html}</div>')
        return page(f"{task} · sample {sample}: A vs B", f'<div class="sidebyside">{"".join(columns)}</div>')

    def search_page(self, query: dict[str, str]) -> bytes:
        text = query.get("q", "")
        regex = query.get("regex") == "1"
        form = (
            f'<form action="/search" method="get" id="searchform"><input name="q" value="{e(text)}" size="50"> '
            f'<label><input type="checkbox" name="regex" value="1"{" checked" if regex else ""}> regex</label> <button>search</button></form>'
        )
        if not text:
            return page("Search", form)
        pattern = compile_query(text, regex)
        hits, scanned = search(enumerate(self.runs), pattern)
        items = []
        for hit in hits:
            link = (
                f"/run/{hit.run}/t/{hit.index}"
                + (f"?step={hit.step}" if hit.step is not None else "")
                + f"#m{hit.message}"
            )
            items.append(
                f'<tr><td>{e(hit.run_name)}</td><td><a href="{link}">{e(hit.task_id)}</a></td><td>{e(hit.where)}</td>'
                f'<td class="snippet">{e(hit.before)}<mark>{e(hit.match)}</mark>{e(hit.after)}</td></tr>'
            )
        body = (
            form
            + f'<p id="hitcount">{len(hits)} hit(s) in {scanned} trajectories{" (first 200 shown)" if len(hits) >= 200 else ""}</p>'
            '<table class="grid" id="hits"><tr><th>run</th><th>trajectory</th><th>where</th><th>match</th></tr>'
            + "".join(items)
            + "</table>"
        )
        return page(f"Search: {text}", body)

    # JSON and images

    def rows_api(self, number: str, query: dict[str, str]) -> dict[str, Any]:
        run = self.run(number)
        rows = run.rows(self._step(query))
        chosen = select(rows, query)
        key = query.get("sort", "index")
        if key not in SORTABLE:
            raise ViewerError(f"cannot sort by {key!r}; columns: {', '.join(SORTABLE)}")
        if key != "index" or query.get("desc") == "1":
            chosen = sorted(chosen, key=lambda r: r[key], reverse=query.get("desc") == "1")
        offset = max(int(query.get("offset", "0") or 0), 0)
        limit = min(max(int(query.get("limit", str(PAGE_SIZE)) or PAGE_SIZE), 1), 1000)
        return {
            "total": len(rows),
            "matching": len(chosen),
            "offset": offset,
            "rows": chosen[offset : offset + limit],
            "statuses": sorted({r["exit_status"] for r in rows}),
            "kind": run.kind,
        }

    def plot(self, number: str, name: str) -> bytes:
        run = self.run(number)
        if name == "overview.svg":
            rows = run.rows()
            key, make = (number, name, len(rows)), lambda: plots.overview(rows)
        elif name == "curves.svg":
            metrics = run.metrics()
            key, make = (number, name, len(metrics)), lambda: plots.training_curves(metrics)
        else:
            raise ViewerError(f"no plot {name!r}")
        with self._lock:
            cached = self._plots.get(key)
        if cached is None:
            cached = make()
            with self._lock:
                self._plots[key] = cached
        return cached


ROUTES: list[tuple[re.Pattern, str, Callable]] = [
    (re.compile(r"/"), "text/html", lambda v, q: v.index(q)),
    (re.compile(r"/run/(\d+)"), "text/html", lambda v, q, n: v.run_page(n, q)),
    (re.compile(r"/run/(\d+)/t/(\d+)"), "text/html", lambda v, q, n, i: v.trajectory_page(n, i, q)),
    (re.compile(r"/run/(\d+)/audit"), "text/html", lambda v, q, n: v.audit_page(n, q)),
    (re.compile(r"/compare"), "text/html", lambda v, q: v.compare_page(q)),
    (re.compile(r"/compare/task"), "text/html", lambda v, q: v.compare_task_page(q)),
    (re.compile(r"/search"), "text/html", lambda v, q: v.search_page(q)),
    (re.compile(r"/api/run/(\d+)/rows"), "application/json", lambda v, q, n: json.dumps(v.rows_api(n, q)).encode()),
    (re.compile(r"/plot/(\d+)/([\w.]+)"), "image/svg+xml", lambda v, q, n, name: v.plot(n, name)),
]
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css"}


def make_handler(viewer: Viewer):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server API
            url = urlparse(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            try:
                if url.path == "/static/pygments.css":
                    return self._send(200, "text/css", render.pygments_css().encode())
                if url.path.startswith("/static/"):
                    path = STATIC / url.path.removeprefix("/static/")
                    if path.parent != STATIC or not path.is_file():
                        return self._send(404, "text/plain", b"not found")
                    return self._send(200, STATIC_TYPES.get(path.suffix, "application/octet-stream"), path.read_bytes())
                for pattern, kind, answer in ROUTES:
                    match = pattern.fullmatch(url.path)
                    if match:
                        return self._send(200, kind, answer(viewer, query, *match.groups()))
                self._send(404, "text/html", page("Not found", f"<p>no page at {e(url.path)}</p>"))
            except ViewerError as err:
                self._send(400, "text/html", page("Error", f'<p class="bad">{e(err)}</p>'))

        def _send(self, status: int, kind: str, data: bytes):
            self.send_response(status)
            self.send_header(
                "Content-Type", f"{kind}; charset=utf-8" if kind.startswith("text") or kind.endswith("json") else kind
            )
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format, *args):  # noqa: A002 - quiet: the CLI prints the address once
            pass

    return Handler


def index_runs(runs: list[Run]) -> int:
    """Index every run's JSONL before the first page is asked for; returns the rows indexed."""
    count = 0
    for run in runs:
        try:
            count += len(run.rows())
        except ViewerError:
            pass  # a training run without rollouts yet: its page says so
    return count


def make_server(runs: list[Run], host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, port), make_handler(Viewer(runs)))
    server.daemon_threads = True
    return server
