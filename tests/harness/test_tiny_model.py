"""The tiny checkpoint loads with the Auto classes and speaks Qwen2.5's chat format."""

from __future__ import annotations

import random

import pytest
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from harness.tiny_model import SPECIAL_TOKENS, TOOL_TAGS, init_tiny

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tokenizer(tiny_model):
    return AutoTokenizer.from_pretrained(tiny_model)


def test_model_loads_with_auto_classes(tiny_model, tokenizer):
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    config = model.config
    assert (tiny_model / "model.safetensors").is_file()
    assert config.model_type == "qwen2" and config.tie_word_embeddings
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (64, 2, 4)
    assert (config.num_key_value_heads, config.intermediate_size, config.max_position_embeddings) == (2, 128, 4096)
    assert config.vocab_size == len(tokenizer) == 2048
    assert GenerationConfig.from_pretrained(tiny_model).eos_token_id == tokenizer.eos_token_id


def test_special_tokens(tokenizer):
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|endoftext|>")
    for token in SPECIAL_TOKENS + TOOL_TAGS:
        assert tokenizer.encode(token, add_special_tokens=False) == [tokenizer.convert_tokens_to_ids(token)]
    ids = tokenizer.encode("<|im_start|>assistant\n<tool_call>{}</tool_call><|im_end|>", add_special_tokens=False)
    # Like Qwen: the tool tags are plain added tokens, kept when special tokens are skipped.
    assert tokenizer.decode(ids, skip_special_tokens=True) == "assistant\n<tool_call>{}</tool_call>"


def test_same_seed_same_checkpoint(tiny_model, tmp_path):
    again = init_tiny(tmp_path / "again")
    first, second = load_file(tiny_model / "model.safetensors"), load_file(again / "model.safetensors")
    assert first.keys() == second.keys() and all(first[k].equal(second[k]) for k in first)
    assert (tiny_model / "tokenizer.json").read_text() == (again / "tokenizer.json").read_text()


BINARYISH = bytes(random.Random(0).randrange(256) for _ in range(2000)).decode("latin-1")


@pytest.mark.parametrize(
    "text",
    [
        "def f(x):\n    return {'a': [1, 2.5, None]}  # done\n",
        "Ünïcödé: 日本語, 한국어, العربية, Ελληνικά, emoji 🤖🎉👩‍💻, math ∀x∈ℝ",
        "".join(map(chr, range(256))),  # every byte value as a character, controls included
        BINARYISH,
        "\x00\x01\x7f\u200b\ufeff\U0010fffd tabs\t\tand\r\nCRLF   trailing   ",
        '<|im_start|>user\n<tool_call>{"name": "bash"}</tool_call><|im_end|><|endoftext|>',
        "",
    ],
)
def test_any_text_round_trips(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids, skip_special_tokens=False) == text


def test_text_is_nfc_normalised_like_qwen(tokenizer):
    # transformers 5 loads qwen2 tokenizers with NFC: decomposed accents come back composed.
    ids = tokenizer.encode("cafe\u0301", add_special_tokens=False)
    assert tokenizer.decode(ids) == "caf\u00e9"


def test_tokenizer_compresses_english_and_code(tokenizer):
    text = "Run the tests in the repository and fix the failing function.\nimport os\nprint(os.path.join('a', 'b'))\n"
    assert len(tokenizer.encode(text, add_special_tokens=False)) < len(text) / 2.5


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        },
    }
]

CONVERSATION = [
    {"role": "system", "content": "Fix the bug."},
    {"role": "user", "content": "Run the tests."},
    {
        "role": "assistant",
        "content": "Running them.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pytest -q"}'}},
            {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "1 failed"},
    {"role": "tool", "tool_call_id": "c2", "content": "a.py"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c3", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c3", "content": "ok"},
]

RENDERED = (
    "<|im_start|>system\nFix the bug.\n\n# Tools\n\n"
    "You can call functions to help with the request. Their signatures are inside <tools></tools>:\n<tools>\n"
    '{"type": "function", "function": {"name": "bash", "description": "Run a command", "parameters": '
    '{"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}\n</tools>\n\n'
    "To call a function, answer with its name and a JSON object of arguments inside <tool_call></tool_call> tags:\n"
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\nRun the tests.<|im_end|>\n"
    "<|im_start|>assistant\nRunning them.\n"
    '<tool_call>\n{"name": "bash", "arguments": {"command": "pytest -q"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\n<tool_response>\n1 failed\n</tool_response>\n<tool_response>\na.py\n</tool_response><|im_end|>\n"
    '<|im_start|>assistant\n<tool_call>\n{"name": "bash", "arguments": {}}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
)


def test_chat_template_with_tools(tokenizer):
    rendered = tokenizer.apply_chat_template(CONVERSATION, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    assert rendered == RENDERED


def test_chat_template_default_system_without_tools(tokenizer):
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False)
    assert rendered == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n"
    )


def test_chat_template_tokenizes_control_tokens_whole(tokenizer):
    ids = tokenizer.apply_chat_template(
        CONVERSATION, tools=TOOLS, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert tokenizer.decode(ids) == RENDERED
    assert ids.count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == RENDERED.count("<|im_start|>")
    assert ids.count(tokenizer.convert_tokens_to_ids("<tool_call>")) == RENDERED.count("<tool_call>")


def test_tool_use_tokenizer_shortens_agent_turns(tokenizer, tmp_path):
    from harness.tools import SCHEMAS
    from tasks.taskset import load_tasks

    task = load_tasks("arith-tool")[0]
    conversation = [
        *task.prompt,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "python", "arguments": '{"code": "print(4 * 8)"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "32\n"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "submit", "arguments": '{"answer": "32"}'}}
            ],
        },
    ]
    tools = [SCHEMAS[name] for name in task.tools]
    fitted = AutoTokenizer.from_pretrained(init_tiny(tmp_path / "tool-use", tool_use=True))
    rendered = fitted.apply_chat_template(conversation, tools=tools, tokenize=False)
    assert rendered == tokenizer.apply_chat_template(conversation, tools=tools, tokenize=False)  # same chat format
    assert fitted.decode(fitted.encode(rendered, add_special_tokens=False)) == rendered
    general = len(tokenizer.encode(rendered, add_special_tokens=False))
    assert len(fitted.encode(rendered, add_special_tokens=False)) < 0.75 * general
