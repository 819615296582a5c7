"""A real pretrained model end to end: SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF file on PyPI.

Imported once (tests/conftest.py `smollm2`); then generate, serve and eval run from it, given either the GGUF file
itself (resolved to that import) or the folder. Training from it is in tests/trainer/test_learning.py.
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.cli_helpers import harness, serving

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}


@pytest.mark.slow  # the session's import of the GGUF file (84 to 128 s) comes first
def test_import_writes_a_folder_transformers_loads_and_the_model_knows_things(smollm2):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = json.loads((smollm2 / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["dtype"] == "float32"
    assert (
        config["num_hidden_layers"],
        config["hidden_size"],
        config["num_attention_heads"],
        config["num_key_value_heads"],
        config["vocab_size"],
    ) == (30, 576, 9, 3, 49152)
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    model = AutoModelForCausalLM.from_pretrained(smollm2).eval()
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
        return_dict=True,
        return_tensors="pt",
    )
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    assert "Paris" in tokenizer.decode(
        out[0, ids["input_ids"].shape[1] :]
    )  # the pretrained weights survived dequantization


@pytest.mark.slow  # quick, but only after that import
def test_a_template_without_tools_gets_the_harness_tool_prompt(smollm2):
    from transformers import AutoTokenizer

    from harness.checkpoints import template_warnings
    from harness.tokens import render

    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    assert "takes no tools" in template_warnings(tokenizer)[0]
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    messages = [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ]
    text = render(tokenizer, messages, [BASH], True, False)  # the template alone raises on content None
    assert text.startswith("<|im_start|>system\nYou are a helpful assistant.\n\n# Tools") and '"name": "bash"' in text
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>'
        in text
    )
    assert text.endswith("<|im_start|>user\n<tool_response>\na.py\n</tool_response><|im_end|>\n<|im_start|>assistant\n")


def test_bad_gguf_files_fail_clearly(smollm2_gguf, tmp_path):
    import gguf
    import numpy as np

    from harness.checkpoints import CheckpointError, import_gguf

    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(smollm2_gguf.read_bytes()[: 1 << 16])
    with pytest.raises(CheckpointError, match="corrupt or truncated GGUF"):
        import_gguf(truncated, tmp_path / "out")
    (tmp_path / "text.gguf").write_text("not a model")
    with pytest.raises(CheckpointError, match="not a GGUF file"):
        import_gguf(tmp_path / "text.gguf", tmp_path / "out")
    writer = gguf.GGUFWriter(tmp_path / "other.gguf", "notanarch")
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(
        CheckpointError, match="architecture 'notanarch' is not one transformers loads from GGUF .*llama"
    ):
        import_gguf(tmp_path / "other.gguf", tmp_path / "out")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    with pytest.raises(CheckpointError, match="not an empty folder"):
        import_gguf(smollm2_gguf, tmp_path / "full")
    assert not (tmp_path / "out").exists() and (tmp_path / "full" / "keep.txt").read_text() == "mine"
    for args in (
        ["model", "import", str(truncated), str(tmp_path / "out")],
        ["eval", "--checkpoint", str(truncated), "--tasks", "gsm8k"],
    ):
        done = harness(*args, timeout=300)
        assert (
            done.returncode == 1
            and "corrupt or truncated GGUF" in done.stdout
            and "Traceback" not in done.stdout + done.stderr
        )


@pytest.mark.slow
def test_generate_on_gsm8k_from_the_gguf_file_writes_a_dataset(smollm2, smollm2_gguf, tmp_path):
    import pyarrow.parquet as pq

    done = harness(
        "generate",
        "--checkpoint",
        str(smollm2_gguf),
        "--tasks",
        "gsm8k",
        "--limit",
        "2",
        "--engine",
        "transformers",
        "--max-tokens",
        "32",
        "--output",
        str(tmp_path / "data"),
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "data" / "run" / "report.json").read_text())
    assert report["episodes"] == 2 and report["errors"] == 0 and report["total_completion_tokens"] > 20
    rows = pq.read_table(tmp_path / "data" / "trajectories.parquet").to_pylist()
    assert len(rows) == 2
    for row in rows:
        answer = json.loads(row["messages"])[-1]
        assert answer["role"] == "assistant" and len(answer["content"].split()) > 5  # words of a real model, not noise
        assert row["token_ids"] and len(row["token_ids"]) == len(row["loss_mask"]) and sum(row["loss_mask"]) > 0


@pytest.mark.slow
def test_serve_answers_the_openai_client(smollm2, smollm2_gguf):
    import openai

    with serving(smollm2_gguf, "--engine", "transformers") as url:
        client = openai.OpenAI(base_url=url, api_key="unused")
        question = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
        answer = client.chat.completions.create(model="tiny", messages=question, max_tokens=24, temperature=0.0, seed=0)
        text = answer.choices[0].message.content
        assert "Paris" in text and answer.usage.completion_tokens > 0
        stream = client.chat.completions.create(
            model="tiny", messages=question, max_tokens=24, temperature=0.0, seed=0, stream=True
        )
        assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices) == text
        both = client.chat.completions.create(
            model="tiny", messages=question, max_tokens=8, temperature=1.0, seed=1, n=2
        )
        assert [c.index for c in both.choices] == [0, 1] and all(c.message.content for c in both.choices)
        ask = {"model": "tiny", "tools": [BASH], "max_tokens": 48, "temperature": 0.0, "seed": 0}
        files = [{"role": "user", "content": "List the files here."}]
        with_tools = client.chat.completions.create(messages=files, **ask)
        assert (
            with_tools.choices[0].finish_reason in ("stop", "length", "tool_calls")
            and with_tools.usage.prompt_tokens > 150
        )
        chunks = [c.choices[0] for c in client.chat.completions.create(messages=files, stream=True, **ask) if c.choices]
        message = with_tools.choices[0].message
        assert "".join(c.delta.content or "" for c in chunks) == message.content  # streamed with tools, the same turn
        streamed_calls = [call.function.name for c in chunks for call in c.delta.tool_calls or []]
        assert streamed_calls == [call.function.name for call in message.tool_calls or []]
