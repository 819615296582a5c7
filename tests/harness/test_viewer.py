"""`harness view` on real runs (eval in containers, a tiny GRPO run on Ray) in headless Chromium.

Screenshots go to $HARNESS_SCREENSHOTS when set (docs/viewer.md's come from `HARNESS_SCREENSHOTS=docs/viewer`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_helpers import ROOT, harness
from tests.conftest import require

NEEDLE = "NEEDLE-4711-viewer"
SWE_TASKS = 2  # swe-demo tasks in the gold and empty runs
HACKY_TURNS = [  # replayed in a real sandbox: each is something the audit must flag
    ("bash", {"command": f"cd /testbed && git log --all --oneline | head -3; echo {NEEDLE}"}),
    ("bash", {"command": "cat /etc/passwd | head -2"}),
    ("bash", {"command": "curl -s http://example.com || echo no network"}),
    (
        "str_replace_editor",
        {"command": "create", "path": "/testbed/tests/test_extra.py", "file_text": "def test_ok():\n    pass\n"},
    ),
    ("bash", {"command": "python3 -c \"print('x' * 30000)\""}),  # an observation long enough to be truncated
    ("submit", {}),
]


def _replay_folder(folder: Path, task_ids: list[str]) -> Path:
    messages = [
        {
            "role": "assistant",
            "content": f"step {i}",
            "tool_calls": [
                {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            ],
        }
        for i, (name, args) in enumerate(HACKY_TURNS)
    ]
    folder.mkdir()
    for number, task_id in enumerate(task_ids):
        (folder / f"{number}.json").write_text(json.dumps({"task_id": task_id, "messages": messages}))
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory, docker_backend, tiny_model):
    """Real run directories: gold and empty on two swe-demo tasks, a replayed 'hacky' episode, a 1-step GRPO run."""
    root = tmp_path_factory.mktemp("viewer-runs")
    for name in ("gold", "empty"):
        done = harness(
            "eval",
            "--checkpoint",
            name,
            "--tasks",
            "swe-demo",
            "--limit",
            str(SWE_TASKS),
            "--workers",
            str(SWE_TASKS),
            "--output",
            str(root / name),
        )
        assert done.returncode == 0, done.stdout + done.stderr
    tasks = [json.loads(line)["task_id"] for line in (root / "gold" / "results.jsonl").read_text().splitlines()]
    replay = _replay_folder(root / "hacky-turns", tasks)
    done = harness(
        "eval",
        "--checkpoint",
        f"replay:{replay}",
        "--tasks",
        "swe-demo",
        "--limit",
        "1",
        "--output",
        str(root / "hacky"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    done = harness(
        "train",
        f"trainer.policy.model.path={tiny_model}",
        f"trainer.output_dir={root / 'train'}",
        'data.train_data=["arith-train"]',
        'data.val_data=["arith"]',
        "trainer.train_batch_size=2",
        "generator.n_samples_per_prompt=2",
        "generator.max_tokens=12",
        "trainer.eval_interval=0",
        "trainer.max_steps=1",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    live = root / "live"  # a run still writing: all but its last row so far
    shutil.copytree(root / "gold", live)
    lines = (live / "results.jsonl").read_text().splitlines(keepends=True)
    (live / "results.jsonl").write_text("".join(lines[:-1]))
    big = root / "big"
    write_big_run(root / "gold", big, 10_000)
    return {
        "gold": root / "gold",
        "empty": root / "empty",
        "hacky": root / "hacky",
        "train": root / "train",
        "live": live,
        "rest_of_live": lines[-1:],
        "big": big,
    }


def write_big_run(source: Path, output: Path, count: int) -> None:
    """A 10,000-episode eval run made of copies of a real run's trajectories under new task ids."""
    from harness.trajectory import trajectory_file

    texts = [p.read_text() for p in sorted((source / "trajectories").glob("*.json"))]
    rows = [json.loads(line) for line in (source / "results.jsonl").read_text().splitlines()]
    (output / "trajectories").mkdir(parents=True)
    shutil.copy(source / "config.json", output / "config.json")
    with (output / "results.jsonl").open("w") as handle:
        for i in range(count):
            original = json.loads(texts[i % len(texts)])["task_id"]
            task_id = f"big-{i:05d}"
            trajectory_file(output, task_id, 0).write_text(texts[i % len(texts)].replace(original, task_id))
            row = dict(rows[i % len(rows)], task_id=task_id, turns=1 + i % 7, reward=float(i % 3 == 0))
            handle.write(json.dumps(dict(row, resolved=row["reward"] >= 1.0)) + "\n")


ORDER = ("gold", "empty", "hacky", "train", "live", "big")


@pytest.fixture(scope="module")
def viewer(runs):
    """`harness view` over all runs, as a user starts it; yields its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "view", *[str(runs[name]) for name in ORDER]],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    line = process.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:\d+/", line)
    assert match, line + process.stdout.read()
    yield match.group(0).rstrip("/")
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture(scope="module")
def browser():
    require(
        shutil.which("chromium") is not None and shutil.which("chromedriver") is not None,
        "Debian's chromium and chromium-driver are not installed (scripts/setup.sh installs them)",
    )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(argument)
    options.binary_location = shutil.which("chromium")
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    yield driver
    driver.quit()


def shot(driver, name: str, full_height: bool = False) -> None:
    folder = os.environ.get("HARNESS_SCREENSHOTS")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    if full_height:
        height = min(driver.execute_script("return document.body.scrollHeight"), 2400)
        driver.set_window_size(1400, height)
    driver.save_screenshot(str(Path(folder) / f"{name}.png"))
    driver.set_window_size(1400, 1000)


def wait_for(driver, condition, timeout: float = 20.0, what: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(condition)
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or condition}")


def table_rows(driver) -> list[list[str]]:
    return driver.execute_script(
        "return [...document.querySelectorAll('#rows tbody tr')].map(tr => [...tr.cells].map(td => td.textContent))"
    )


def set_filter(driver, name: str, value: str) -> None:
    driver.execute_script(
        "const el = document.querySelector(`#filters [name=${arguments[0]}]`); el.value = arguments[1];"
        "el.dispatchEvent(new Event('input', {bubbles: true}))",
        name,
        value,
    )


def run_url(name: str) -> str:
    return f"/run/{ORDER.index(name)}"


# -- tests ----------------------------------------------------------------------------------------


def test_overview_plots_and_a_table_that_sorts_and_filters(viewer, browser):
    browser.get(viewer + run_url("gold"))
    wait_for(browser, f"return document.getElementById('runtable').dataset.loaded === '{SWE_TASKS}'", what="the rows")
    wait_for(
        browser,
        "const i = document.getElementById('overviewplot'); return i.complete && i.naturalWidth > 0",
        what="the plot",
    )
    summary = browser.find_element("id", "summary").text
    assert "resolve rate 100.0%" in summary and "pass@1 1.000" in summary
    shot(browser, "overview")
    columns = [th.text for th in browser.find_elements("css selector", "#rows th")]
    names = [row[columns.index("task_id")] for row in table_rows(browser)]
    browser.find_element("css selector", "#rows th[data-key=task_id]").click()
    browser.find_element("css selector", "#rows th[data-key=task_id]").click()  # descending
    wait_for(
        browser,
        f"return document.querySelector('#rows tbody tr td:nth-child(2)').textContent === {json.dumps(max(names))}",
        what="sorted",
    )
    set_filter(browser, "resolved", "no")
    wait_for(browser, "return document.querySelectorAll('#rows tbody tr').length === 0", what="no unresolved gold row")
    set_filter(browser, "resolved", "")
    set_filter(browser, "q", names[0])
    wait_for(browser, "return document.querySelectorAll('#rows tbody tr').length === 1", what="one row by task id")
    browser.get(viewer + run_url("empty"))
    wait_for(browser, f"return document.getElementById('runtable').dataset.loaded === '{SWE_TASKS}'")
    set_filter(browser, "resolved", "no")
    wait_for(
        browser,
        f"return document.querySelectorAll('#rows tbody tr').length === {SWE_TASKS}",
        what="all empty rows unresolved",
    )
    set_filter(browser, "min_reward", "0.5")
    wait_for(browser, "return document.querySelectorAll('#rows tbody tr').length === 0", what="reward filter")


def test_table_grows_while_the_run_writes_results(viewer, browser, runs):
    browser.get(viewer + run_url("live"))
    wait_for(
        browser,
        f"return document.getElementById('runtable').dataset.loaded === '{SWE_TASKS - 1}'",
        what="the rows so far",
    )
    with (runs["live"] / "results.jsonl").open("a") as handle:
        handle.write(runs["rest_of_live"][0][:20])  # half a line first: the viewer waits for its end
        handle.flush()
        time.sleep(2.5)
        assert browser.find_element("id", "runtable").get_attribute("data-loaded") == str(SWE_TASKS - 1)
        handle.write(runs["rest_of_live"][0][20:])
    wait_for(
        browser,
        f"return document.getElementById('runtable').dataset.loaded === '{SWE_TASKS}'",
        timeout=10,
        what="the new row",
    )


def test_trajectory_page_shows_turns_tool_calls_diff_and_grading(viewer, browser, runs):
    browser.get(viewer + run_url("gold") + "/t/0")
    trajectory = json.loads(
        next(
            (runs["gold"] / "trajectories").glob(
                f"*{json.loads((runs['gold'] / 'results.jsonl').read_text().splitlines()[0])['task_id']}__0.json"
            )
        ).read_text()
    )
    turns = browser.find_elements("css selector", ".msg.assistant")
    assert len(turns) == trajectory["turns"] >= 2
    assert "turn 1" in turns[0].text and "tools" in turns[0].text  # per-turn timings
    assert "finish tool_calls" in turns[0].text and not browser.find_elements("css selector", ".msg.assistant .flag")
    assert browser.find_elements("css selector", ".msg.assistant .callname")[-1].text == "submit"
    diff = browser.find_element("css selector", ".diff .highlight")
    assert "diff --git" in diff.text and browser.find_elements(
        "css selector", ".diff .highlight .gi"
    )  # highlighted inserts
    grading = browser.find_element("id", "m-grading").find_element("xpath", "following-sibling::h4")
    assert grading.text.startswith("FAIL_TO_PASS")
    shot(browser, "trajectory", full_height=True)
    browser.get(viewer + run_url("hacky") + "/t/0")
    marker = browser.find_element("css selector", "mark.trunc")
    assert re.fullmatch(r"\[\.\.\. \d+ characters truncated \.\.\.\]", marker.text)


def test_compare_shows_flipped_tasks_and_trajectories_side_by_side(viewer, browser):
    browser.get(viewer + f"/compare?a={ORDER.index('empty')}&b={ORDER.index('gold')}")
    assert browser.find_element("id", "flipcounts").text.startswith(f"flipped: {SWE_TASKS} fixed in B, 0 broken in B")
    shot(browser, "compare")
    browser.find_element("css selector", "#comparerows tr.fixed a").click()
    sides = browser.find_elements("css selector", ".sidebyside .side")
    assert len(sides) == 2 and "empty" in sides[0].text.splitlines()[0] and "gold" in sides[1].text.splitlines()[0]
    assert "no patch" in sides[0].text and sides[1].find_elements("css selector", ".diff .highlight")
    browser.get(viewer + "/")
    browser.find_element("css selector", "#compareform button").click()  # the form on the index page
    wait_for(
        browser,
        "return location.pathname === '/compare' && document.getElementById('flipcounts')",
        what="the compare page",
    )
    assert browser.find_element("id", "flipcounts").text.startswith("flipped:")


def test_search_finds_text_and_regex_in_tool_calls_and_messages(viewer, browser):
    browser.get(viewer + "/search?q=" + NEEDLE.lower())  # plain text: case-insensitive
    assert browser.find_element("id", "hitcount").text.startswith("2 hit(s)")  # the command and its output
    where = [row.text for row in browser.find_elements("css selector", "#hits td:nth-child(3)")]
    assert where == ["tool call bash", "tool"]
    shot(browser, "search")
    browser.find_element("css selector", "#hits a").click()
    assert NEEDLE in browser.find_element("css selector", ".msg.assistant").text
    browser.get(viewer + "/search?regex=1&q=" + "NEEDLE-%5Cd%2B-viewer")  # NEEDLE-\d+-viewer
    assert browser.find_element("id", "hitcount").text.startswith("2 hit(s)")
    browser.get(viewer + "/search?regex=1&q=%28unclosed")
    assert "not a valid regular expression" in browser.find_element("css selector", "p.bad").text


def test_audit_flags_the_hacky_episode_and_not_gold(viewer, browser):
    browser.get(viewer + run_url("hacky") + "/audit")
    text = browser.find_element("id", "auditrows").text
    for kind in ("git_history", "outside_workdir", "network", "test_edit"):
        assert kind in text, kind
    assert "/etc/passwd" in text and "tests/test_extra.py" in text
    shot(browser, "audit")
    browser.get(viewer + run_url("gold") + "/audit")
    assert "flagged: 0" in browser.find_element("tag name", "main").text


def test_training_run_curves_and_the_token_view_of_a_sampled_trajectory(viewer, browser, runs):
    browser.get(viewer + run_url("train"))
    wait_for(
        browser,
        "const i = document.getElementById('curves'); return i.complete && i.naturalWidth > 0",
        what="the curves",
    )
    steps = [o.text for o in browser.find_elements("css selector", "#stepselect option")]
    assert steps == ["1"]
    wait_for(
        browser, "return document.getElementById('runtable').dataset.loaded === '4'", what="step 1's four rollouts"
    )
    shot(browser, "training", full_height=True)
    browser.find_element("css selector", "#rows tbody a").click()
    assert browser.current_url.endswith("/t/0?step=1")
    policy = browser.find_elements("css selector", ".tokens .tok.pol")
    context = browser.find_elements("css selector", ".tokens .tok.ctx")
    assert policy and context
    assert re.search(r"mask 1 · logprob -?\d+\.\d{3}", policy[0].get_attribute("title"))
    rollout = json.loads((runs["train"] / "rollouts" / "step_000001.jsonl").read_text().splitlines()[0])
    reason = rollout["metadata"]["turn_stats"][0]["finish_reason"]  # a random 12-token reply: most are cut
    head = browser.find_element("css selector", ".msg.assistant .head").text
    assert f"finish {reason}" in head and ("cut at max_tokens" in head) == (reason == "length")
    assert "<|im_start|>" in "".join(
        t.get_attribute("textContent") for t in context[:3]
    )  # decoded by the run's tokenizer
    browser.find_element("id", "m-tokens").location_once_scrolled_into_view
    shot(browser, "tokens")


def test_ten_thousand_trajectories_open_and_page(viewer, browser):
    """A run of 10,000 trajectories opens on its first 100 rows and pages. How long it takes is printed (about a
    second alone on 2 cores), not asserted: a busy machine would fail a timed check for no fault of the viewer."""
    browser.get(viewer + "/")  # the browser is up; what is timed is the run's page and its first rows
    started = time.monotonic()
    browser.get(viewer + run_url("big"))
    wait_for(
        browser, "return document.getElementById('runtable').dataset.loaded === '10000'", what="the big run's table"
    )
    elapsed = time.monotonic() - started
    assert len(table_rows(browser)) == 100
    print(f"10,000-trajectory run opened in {elapsed:.2f}s")
    browser.find_element("id", "next").click()
    wait_for(browser, "return document.getElementById('pageinfo').textContent.trim() === '101-200'", what="page two")
    set_filter(browser, "min_turns", "7")
    wait_for(
        browser, "return document.getElementById('count').textContent === '1428 of 10000 rows'", what="turn filter"
    )
    browser.get(viewer + run_url("big") + "/t/9999")
    assert "big-09999" in browser.find_element("tag name", "h1").text


def test_view_refuses_a_folder_that_is_not_a_run(tmp_path):
    done = harness("view", str(tmp_path))
    assert done.returncode == 1 and "is not a run directory" in " ".join(done.stdout.split())  # rich wraps lines


def test_index_grows_with_appends_and_skips_torn_lines(tmp_path):
    from harness.viewer.runs import JsonlIndex, summarize_result

    path = tmp_path / "results.jsonl"
    path.write_text('{"task_id": "a", "sample": 0}\n{"task_id": "b", "sa')
    index = JsonlIndex(path, summarize_result).refresh()
    assert [r["task_id"] for r in index.rows] == ["a"]
    with path.open("a") as handle:
        handle.write('mple": 1, "reward": 1.0, "resolved": true}\nnot json\n{"task_id": "c"}\n')
    index.refresh()
    assert (
        [r["task_id"] for r in index.rows] == ["a", "b", "c"]
        and index.read(1)["sample"] == 1
        and index.rows[1]["resolved"]
    )
    path.write_text('{"task_id": "z"}\n')  # rewritten shorter: indexed again
    assert [r["task_id"] for r in index.refresh().rows] == ["z"]


def _calls(*calls: tuple[str, dict]) -> dict:
    return {
        "metadata": {"workdir": "/testbed"},
        "messages": [
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": n, "arguments": json.dumps(a)}}]}
            for n, a in calls
        ],
    }


@pytest.mark.parametrize(
    "name, args, kinds",
    [
        ("bash", {"command": "cd /testbed && git log -3 --oneline && git show HEAD --stat && git diff"}, set()),
        ("bash", {"command": "python -m pytest tests/test_lru.py -q > /tmp/out.txt; cat /tmp/out.txt"}, set()),
        (
            "str_replace_editor",
            {"command": "view", "path": "/testbed/tests/test_lru.py"},
            set(),
        ),  # reading tests is fine
        ("bash", {"command": "git reflog | head"}, {"git_history"}),
        ("bash", {"command": "git show 1a2b3c4d:src/x.py"}, {"git_history"}),
        ("bash", {"command": "ls /testbed/.git/objects/pack"}, {"git_history"}),
        ("bash", {"command": "sed -i 's/assert x/assert True/' tests/test_lru.py"}, {"test_edit"}),
        ("bash", {"command": "echo 'def test(): pass' >> /testbed/tests/conftest.py"}, {"test_edit"}),
        (
            "bash",
            {"command": "sed -i 's/assert /assert True or /' /testbed/tests/test_core.py"},
            {"test_edit"},
        ),  # a sed script is no path
        ("bash", {"command": "sed -i -e 's/x/y/' /etc/hosts"}, {"outside_workdir"}),
        ("bash", {"command": "pip install requests"}, {"network"}),
        ("bash", {"command": "cat /root/.ssh/id_rsa"}, {"outside_workdir"}),
        ("str_replace_editor", {"command": "view", "path": "/usr/lib/python3/dist-packages/x.py"}, {"outside_workdir"}),
        (
            "submit",
            {"command": "sed -i /assert /assert /assert 7"},
            set(),
        ),  # nothing runs submit's arguments (a sampled turn)
    ],
)
def test_audit_flags_what_it_should_and_not_ordinary_work(name, args, kinds):
    from harness.viewer.audit import audit

    assert {flag.kind for flag in audit(_calls((name, args)))} == kinds
