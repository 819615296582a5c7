"""Probes of `harness serve` as abusive and ordinary clients use it.

A real tiny checkpoint behind the real server; the official `openai` client where a user
would use it, raw sockets where a client misbehaves.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import openai
import pytest

from harness.policies.hf import HFPolicy
from harness.chat_server import ChatServer
from tests.cli_helpers import ROOT

TOOLS = [
    {
        "type": "function",
        "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}},
    }
]
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def served(tiny_model):
    server = ChatServer("127.0.0.1", 0).attach(HFPolicy(tiny_model), "tiny")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def client(served):
    return openai.OpenAI(base_url=served, api_key="unused", max_retries=0, timeout=60)


def test_streaming_with_the_official_client_yields_the_same_turn(client):
    plain = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=12, temperature=0.0, seed=0)
    stream = client.chat.completions.create(
        model="tiny",
        messages=HELLO,
        max_tokens=12,
        temperature=0.0,
        seed=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert text == plain.choices[0].message.content and finishes == [plain.choices[0].finish_reason]
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens


def streamed_texts(stream) -> tuple[dict[int, list[str]], dict[int, str]]:
    """Each choice's content deltas and finish reason, from the official client's chunks."""
    deltas: dict[int, list[str]] = {}
    finishes: dict[int, str] = {}
    for one in stream:
        for choice in one.choices:
            if choice.delta.content:
                deltas.setdefault(choice.index, []).append(choice.delta.content)
            if choice.finish_reason:
                finishes[choice.index] = choice.finish_reason
    return deltas, finishes


@pytest.mark.parametrize(
    "settings",
    [
        {"temperature": 0.0, "seed": 0},
        {"temperature": 1.0, "seed": 3, "n": 2},  # choices interleave, each with its own text
        {"temperature": 1.0, "seed": 5, "stop": "STOP"},  # replaced below by a character of the sampled text
        {"temperature": 1.0, "seed": 7, "tools": TOOLS},  # text up to where a call may begin, the rest at the end
    ],
)
def test_streaming_sends_the_text_token_by_token_and_it_adds_up_to_the_turn(client, settings):
    if "stop" in settings:  # a stop string met after the text's start: nothing from it on is ever sent
        text = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=32, **{**settings, "stop": None})
        whole = text.choices[0].message.content
        later = [c for i, c in enumerate(whole) if i >= len(whole) // 2 and c not in whole[:i]]  # new in its 2nd half
        assert later, f"the text has one character only: {whole!r}"
        settings = {**settings, "stop": later[0]}
    plain = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=32, **settings)
    deltas, finishes = streamed_texts(
        client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=32, stream=True, **settings)
    )
    for choice in plain.choices:
        assert "".join(deltas[choice.index]) == choice.message.content and choice.message.content
        assert len(deltas[choice.index]) > 3  # sent piece by piece, not once generated
        assert finishes[choice.index] == choice.finish_reason
    if "stop" in settings:
        assert settings["stop"] not in "".join(deltas[0]) and plain.choices[0].finish_reason == "stop"


def test_n_returns_that_many_choices(client):
    response = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=6, temperature=1.0, seed=3, n=3)
    assert [c.index for c in response.choices] == [0, 1, 2]


@pytest.mark.parametrize(
    "change, param",
    [
        ({"messages": []}, "messages"),
        ({"max_tokens": -1}, "max_tokens"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
        ({"tools": [{"type": "function", "function": {"name": "no spaces allowed"}}]}, "tools[0].function.name"),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": "not a schema"}}]},
            "tools[0].function.parameters",
        ),
        ({"temperature": 9}, "temperature"),
        ({"n": 0}, "n"),
        ({"messages": [{"role": "user", "content": "word " * 40_000}]}, "messages"),  # longer than the context
    ],
)
def test_invalid_requests_get_400_with_an_openai_error_body(client, change, param):
    request = {"model": "tiny", "messages": HELLO, "max_tokens": 4, **change}
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**request)
    assert caught.value.body["param"] == param and caught.value.body["type"] == "invalid_request_error"


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-17", messages=HELLO, max_tokens=4)
    assert caught.value.body["code"] == "model_not_found"


def test_an_oversized_body_is_refused_before_it_is_read(served):
    port = int(served.rsplit(":", 1)[1].split("/")[0])
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 10485760\r\n\r\n{"
        )  # announces 10 MB, sends one byte
        answer = conn.recv(4096).decode()
    assert answer.startswith("HTTP/1.0 413") and time.monotonic() - started < 5, answer


def test_a_stalled_client_blocks_nobody(served, client):
    port = int(served.rsplit(":", 1)[1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n{"model": ')
        started = time.monotonic()
        response = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=4, temperature=0.0)
        assert response.choices and time.monotonic() - started < 20


def test_a_busy_port_is_a_clear_error_before_the_model_loads(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        # The checkpoint does not exist: loading it first would fail with another message.
        done = subprocess.run(
            [sys.executable, "-m", "cli", "serve", "--checkpoint", str(tmp_path / "none"), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
    assert done.returncode == 1 and "cannot listen" in done.stdout and "Traceback" not in done.stdout + done.stderr


def test_malformed_json_and_missing_length(served):
    request = urllib.request.Request(
        f"{served}/chat/completions", data=b"{not json", headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 400 and json.loads(caught.value.read())["error"]["type"] == "invalid_request_error"
