"""The intercepting endpoint with a real tiny checkpoint: exact tokens, drift, per-episode keys, refusals."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from harness.policies.hf import HFPolicy
from harness.policy import Sampling
from harness.scaffolds.intercept import EpisodeEndpoint, intercept_server


def post(url: str, key: str, body) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture(scope="module")
def policy(tiny_model, one_torch_thread):
    return HFPolicy(tiny_model)


def test_calls_continue_the_sampled_tokens_and_a_rewritten_history_is_drift(policy):
    server = intercept_server()
    endpoint = EpisodeEndpoint(
        policy, Sampling(temperature=1.0, max_tokens=8, seed=5), None, max_turns=4, max_context=4096, command_timeout=10
    )
    key = server.open(endpoint)
    chat = f"{server.url}/v1/chat/completions"
    history = [{"role": "system", "content": "Fix it."}, {"role": "user", "content": "The bug is in x.py."}]
    try:
        status, first = post(chat, key, {"model": "harness", "messages": history})
        assert status == 200
        history += [first["choices"][0]["message"], {"role": "user", "content": "exit code 0\nok"}]
        status, second = post(chat, key, {"model": "harness", "messages": history})
        assert status == 200
        ids, mask = endpoint.tokens.ledger.ids, endpoint.tokens.ledger.mask
        calls = endpoint.calls
        # the second prompt is the first prompt, the first call's sampled ids, then the new message's tokens
        first_prompt = ids[: calls[0]["prompt_length"]]
        after = ids[calls[0]["prompt_length"] :]
        assert after[: len(calls[0]["token_ids"])] == calls[0]["token_ids"]
        assert calls[1]["prompt_length"] > calls[0]["prompt_length"] + len(calls[0]["token_ids"])
        assert ids[: len(first_prompt)] == first_prompt
        assert [t for t, m in zip(ids, mask) if m] == calls[0]["token_ids"] + calls[1]["token_ids"]
        assert all(d.kind == "tokens" for d in endpoint.tokens.drifts)  # no history was rewritten
        # an earlier answer edited by the scaffold: recorded as history drift, a new token segment starts
        edited = [*history[:2], {"role": "assistant", "content": "something else"}, history[3]]
        status, third = post(chat, key, {"model": "harness", "messages": edited})
        assert status == 200
        assert [(d.call, d.kind, d.position) for d in endpoint.tokens.drifts if d.kind == "history"] == [
            (2, "history", 2)
        ]
        assert len(endpoint.tokens.segments) == 1 and endpoint.calls[2]["segment"] == 1
        # refusals are answered, recorded, and end nothing
        assert post(chat, key, {"model": "harness", "messages": "not a list"})[0] == 400
        assert post(chat, key, b"{not json")[0] == 400
        assert post(f"{server.url}/harness/exec", key, {"command": "ls"})[0] == 400  # no sandbox for this episode
        assert len(endpoint.rejected) == 3 and not endpoint.ended
        assert post(chat, "hx-unknown", {"model": "harness", "messages": history})[0] == 401
        # the turn limit: the fifth call is refused and ends the episode
        edited += [third["choices"][0]["message"], {"role": "user", "content": "go on"}]
        assert post(chat, key, {"model": "harness", "messages": edited})[0] == 200
        assert endpoint.calls[3]["segment"] == 1  # continues the new segment
        status, body = post(chat, key, {"model": "harness", "messages": history})
        assert status == 429 and endpoint.ended == "max_turns", body
        record = endpoint.token_record()
        assert len(record["token_ids"]) == len(record["loss_mask"]) == len(record["logprobs"])
        assert len(record["token_segments"]) == 1 and len(record["calls"]) == 4
    finally:
        server.close_episode(key)
    assert post(chat, key, {"model": "harness", "messages": history})[0] == 401  # a closed episode's key is dead


def test_the_audit_reads_what_a_scaffold_ran():
    from harness.viewer.hacking import attempts

    trajectory = {
        "messages": [
            {"role": "user", "content": "Fix it."},
            {"role": "assistant", "content": "```bash\nsed -i s/1/2/ tests/t.py\n```"},
        ],
        "metadata": {
            "workdir": "/testbed",
            "scaffold": {
                "commands": [
                    {"after_call": 0, "command": "cd /testbed && sed -i s/1/2/ tests/test_lru.py", "exit_code": 0}
                ]
            },
        },
    }
    assert "test_edit" in attempts(trajectory)
    trajectory["metadata"]["scaffold"]["commands"] = [
        {"after_call": 0, "command": "cd /testbed && sed -i s/1/2/ lru.py"}
    ]
    assert "test_edit" not in attempts(trajectory)
