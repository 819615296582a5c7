"""Tiny random checkpoints built locally, for tests and smoke runs without a model hub.

`init_tiny(DIR)` writes a Qwen2-architecture directory that `AutoModelForCausalLM.from_pretrained`
and `AutoTokenizer.from_pretrained` load as they are: a byte-level BPE tokenizer trained on a small
generated corpus, Qwen's special tokens and chat format (with tool calls), and random weights.
`init_tiny_on_tokenizer(DIR, TOKENIZER)` puts random Llama-architecture weights under a real
model family's tokenizer and chat template instead.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import jinja2.sandbox
import shutil
import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import (
    AutoTokenizer,
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from .errors import HarnessError

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOOL_TAGS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
EOS, PAD = "<|im_end|>", "<|endoftext|>"

# Qwen2's pre-tokenization split (contractions, letters, single digits, punctuation, whitespace).
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Qwen2.5's chat format, written from its description: tool schemas listed in the system turn,
# calls as <tool_call> JSON blocks, tool results grouped into one user turn of <tool_response>s.
CHAT_TEMPLATE = """\
{%- if messages and messages[0].role == 'system' -%}
    {%- set system = messages[0].content -%}
    {%- set turns = messages[1:] -%}
{%- else -%}
    {%- set system = 'You are a helpful assistant.' -%}
    {%- set turns = messages -%}
{%- endif -%}
{{- '<|im_start|>system\\n' + system -}}
{%- if tools -%}
    {{- '\\n\\n# Tools\\n\\nYou can call functions to help with the request. Their signatures are inside <tools></tools>:\\n<tools>' -}}
    {%- for tool in tools -%}
        {{- '\\n' + tool | tojson -}}
    {%- endfor -%}
    {{- '\\n</tools>\\n\\nTo call a function, answer with its name and a JSON object of arguments inside <tool_call></tool_call> tags:\\n<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call>' -}}
{%- endif -%}
{{- '<|im_end|>\\n' -}}
{%- for message in turns -%}
    {%- if message.role == 'tool' -%}
        {%- if loop.first or turns[loop.index0 - 1].role != 'tool' -%}
            {{- '<|im_start|>user' -}}
        {%- endif -%}
        {{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' -}}
        {%- if loop.last or turns[loop.index0 + 1].role != 'tool' -%}
            {{- '<|im_end|>\\n' -}}
        {%- endif -%}
    {%- elif message.role == 'assistant' -%}
        {{- '<|im_start|>assistant\\n' + (message.content or '') -}}
        {%- for call in message.tool_calls or [] -%}
            {%- set fn = call.function or call -%}
            {%- if not loop.first or message.content -%}
                {{- '\\n' -}}
            {%- endif -%}
            {{- '<tool_call>\\n{"name": "' + fn.name + '", "arguments": ' -}}
            {#- OpenAI carries arguments as JSON text: keep it as written; dicts are serialised. -#}
            {{- fn.arguments if fn.arguments is string else fn.arguments | tojson -}}
            {{- '}\\n</tool_call>' -}}
        {%- endfor -%}
        {{- '<|im_end|>\\n' -}}
    {%- else -%}
        {{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|im_start|>assistant\\n' -}}
{%- endif -%}
"""

WORDS = """the of and to in is that it for was on are as with be at by this have from or one had not but
what all were when we there can an your which their said if do will each about how up out them then she
many some so these would other into has more her two like him see time could no make than first been its
who now people my made over did down only way find use may water long little very after words called just
where most know get through back much go good new write our me man too any day same right look think also
around another came come work three word must because does part even place well such here take why things
help put years different away again off went old number great tell men say small every found still between
name should home big give air line set own under read last never us left end along while might next sound
below saw something thought both few those always looked show large often together asked house world going
want school important until form food keep children feet land side without boy once animals life enough took
sometimes four head above kind began almost live page got earth need far hand high year mother light parts
country father let night following picture being study second eyes soon times story boys since white days
file test error value function return class import self list dict string path output input result check fix
bug patch repository commit branch tests passed failed run command shell directory config model token answer
""".split()

PYTHON_SNIPPETS = [
    "def {a}({b}, {c}=None):\n    if {c} is None:\n        {c} = []\n    return [{b} for {b} in {c} if {b}]\n",
    'class {A}:\n    def __init__(self, {b}):\n        self.{b} = {b}\n\n    def __repr__(self):\n        return f"{A}({{self.{b}!r}})"\n',
    "import os\nimport sys\nfrom pathlib import Path\n\n{a} = Path(sys.argv[1]).read_text()\nprint(len({a}.splitlines()))\n",
    "for {b} in range({n}):\n    {a}[{b}] += {b} * {m}\n",
    'try:\n    {a} = json.loads({b})\nexcept ValueError as exc:\n    raise RuntimeError(f"bad {b}: {{exc}}") from exc\n',
    'assert {a}({n}) == {m}, "{a} failed"\n',
    'with open("{a}.txt", "w") as f:\n    f.write("{b}\\n")\n',
    '@pytest.mark.parametrize("{b}", [{n}, {m}])\ndef test_{a}({b}):\n    assert {a}({b}) >= 0\n',
]

BASH_SNIPPETS = [
    "cd /testbed && python -m pytest -q tests/test_{a}.py -x\n",
    'grep -rn "{a}" src/ | head -n {n}\n',
    "ls -la {a}/ && cat {a}/{b}.py\n",
    "sed -n '{n},{m}p' {a}.py\n",
    "git diff --stat && git status --short\n",
    'echo "{a} {b}" > /tmp/{a}.log; wc -l /tmp/{a}.log\n',
    "find . -name '*.py' -newer {a}.py | xargs python -m py_compile\n",
]


def _corpus(seed: int, lines: int = 12000, tool_use: bool = False) -> list[str]:
    """English-like prose, arithmetic word problems, Python and bash snippets, numbers and tool-call JSON, a few hundred KB.

    tool_use swaps the generic tool-call lines for this harness's own: the system turn that lists
    the tools and calls of python and submit, so that an agent's prompt and turns tokenize about
    40% shorter (a tiny model then learns to copy numbers through tool calls several times faster).
    """
    rng = random.Random(seed)

    def fill(template: str) -> str:
        a, b, c = rng.sample(WORDS, 3)
        return template.format(a=a, b=b, c=c, A=a.title(), n=rng.randint(0, 999), m=rng.randint(0, 99999))

    def tool_call() -> str:
        arguments = {"command": fill(rng.choice(BASH_SNIPPETS)).strip(), "timeout": rng.randint(1, 600)}
        call = {"name": rng.choice(["bash", "submit", "read_file"]), "arguments": arguments}
        return "<tool_call>\n" + json.dumps(call) + "\n</tool_call>"

    def agent_tool_call() -> str:
        a, b = rng.randint(0, 999), rng.randint(0, 99)
        name, arguments = rng.choice(
            [
                ("bash", {"command": fill(rng.choice(BASH_SNIPPETS)).strip()}),
                ("python", {"code": f"print({a} {rng.choice('+-*/')} {b})"}),
                ("submit", {"answer": str(a)}),
                ("submit", {}),
            ]
        )
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"

    def system_turn_with_tools() -> str:
        from harness.tools import SCHEMAS

        names = rng.sample(sorted(SCHEMAS), rng.randint(1, len(SCHEMAS)))
        text = _render_chat([], tools=[SCHEMAS[name] for name in names])
        return text.replace("<|im_start|>", "").replace("<|im_end|>", "")

    def word_problem() -> str:  # GSM8K-style arithmetic, so that questions and `#### 42` answers tokenize compactly
        from tasks.arith import NAMES, TEMPLATES, THINGS
        from tasks.gsm8k import INSTRUCTION, TOOL_INSTRUCTION

        (template, op), a, b = rng.choice(TEMPLATES), rng.randint(0, 99), rng.randint(0, 99)
        question = template.format(n=rng.choice(NAMES), t=rng.choice(THINGS), a=a, b=b)
        value = {"+": a + b, "-": a - b, "*": a * b}[op]
        answer = f"{a} {op} {b} = {value}\n#### {value}"
        return rng.choice(
            [
                question + "\n\n" + rng.choice([INSTRUCTION, TOOL_INSTRUCTION]),
                answer,
                "system\nYou are a helpful assistant.\nuser\nassistant\n",
            ]
        )

    makers = [
        word_problem,
        lambda: " ".join(rng.choices(WORDS, k=rng.randint(4, 20))).capitalize() + rng.choice([".", "?", "!", ":"]),
        lambda: fill(rng.choice(PYTHON_SNIPPETS)),
        lambda: fill(rng.choice(BASH_SNIPPETS)),
        lambda: " ".join(str(rng.randint(0, 10 ** rng.randint(1, 9))) for _ in range(rng.randint(1, 8))),
        lambda: json.dumps({rng.choice(WORDS): [rng.random(), rng.choice(WORDS), None, True] for _ in range(3)}),
        *([agent_tool_call, system_turn_with_tools] if tool_use else [tool_call]),
        lambda: "<tool_response>\n" + fill(rng.choice(BASH_SNIPPETS)) + "</tool_response>",
    ]
    return [rng.choice(makers)() for _ in range(lines)]


def _render_chat(messages: list[dict], tools: list[dict] | None = None) -> str:
    """CHAT_TEMPLATE rendered as transformers renders it (its `tojson` is json.dumps), without a tokenizer."""
    environment = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.filters["tojson"] = json.dumps
    return environment.from_string(CHAT_TEMPLATE).render(messages=messages, tools=tools, add_generation_prompt=False)


def _train_tokenizer(corpus: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Qwen2's pipeline: NFC, Qwen's split, byte-level BPE. Any NFC text round-trips exactly.

    The NFC normalizer is there because transformers 5 loads every qwen2 checkpoint with its
    own Qwen2Tokenizer pipeline, which applies NFC whatever tokenizer.json says; writing the
    same pipeline keeps tokenization identical under every loader (tokenizers, vLLM, 4.x).
    """
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(SPECIAL_TOKENS) - len(TOOL_TAGS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer)
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    # Plain added tokens, as in Qwen: one id each, but kept by skip_special_tokens.
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TAGS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=SPECIAL_TOKENS,
        model_max_length=4096,
        chat_template=CHAT_TEMPLATE,
    )


def init_tiny(
    output_dir: str | Path,
    vocab_size: int = 2048,
    seed: int = 0,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate_size: int | None = None,
    tool_use: bool = False,
) -> Path:
    """Write a tiny random Qwen2 checkpoint (tokenizer, chat template, safetensors) to output_dir.

    vocab_size counts every token: BPE merges, the 256 bytes and the 7 added tokens. seed fixes
    both the tokenizer's training corpus and the weights: same arguments, same checkpoint.
    Default sizes: hidden 64, 2 layers, 4 attention heads (2 key/value), MLP 2 x hidden (128),
    context 4096, tied embeddings (about 0.2M parameters). tool_use: a tokenizer fitted to tool-calling
    agents' turns (see _corpus). Returns the directory.
    """
    output_dir = Path(output_dir)
    tokenizer = _train_tokenizer(_corpus(seed, tool_use=tool_use), vocab_size)
    eos_id, pad_id = tokenizer.convert_tokens_to_ids([EOS, PAD])
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        intermediate_size=intermediate_size or 2 * hidden_size,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=pad_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=pad_id, eos_token_id=eos_id, pad_token_id=pad_id)
    model.save_pretrained(output_dir, safe_serialization=True)
    _save_tokenizer(tokenizer, output_dir)
    return output_dir


def _save_tokenizer(tokenizer: PreTrainedTokenizerFast, output_dir: Path) -> None:
    """Save, then describe the tokenizer as Qwen2.5 checkpoints do, for loaders that expect one."""
    tokenizer.save_pretrained(output_dir)
    config_path = output_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.pop("backend", None)
    config["additional_special_tokens"] = config.pop("extra_special_tokens", SPECIAL_TOKENS)
    config["tokenizer_class"] = "Qwen2Tokenizer"
    config["chat_template"] = CHAT_TEMPLATE
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")


TOKENIZER_FILES = ("tokenizer.json", "special_tokens_map.json", "added_tokens.json")  # copied as they are


def init_tiny_on_tokenizer(
    output_dir: str | Path,
    tokenizer: str | Path,
    chat_template: str | Path | None = None,
    seed: int = 0,
    hidden_size: int = 64,
    layers: int = 2,
) -> Path:
    """Write a tiny random Llama-architecture checkpoint on a real tokenizer and its chat template.

    `tokenizer` is a folder with tokenizer.json and tokenizer_config.json (or that tokenizer.json). The chat
    template is `chat_template` when given, else the one .jinja file beside the tokenizer, else the one in
    tokenizer_config.json. The tokenizer files are copied as they are. Two attention heads of 32 dimensions
    (the least vLLM's kernels take), one key/value head, MLP 2 x hidden, tied embeddings; the end-of-turn token
    the template writes after a reply (and the one ending a reply with a call, where the format has its own) is an
    end-of-sequence token of the generation config."""
    from .parsing import tool_call_format
    from .tokens import turn_end

    source = Path(tokenizer)
    source = source.parent if source.name == "tokenizer.json" else source
    if not (source / "tokenizer.json").is_file():
        raise HarnessError(
            f"--tokenizer {tokenizer}: no tokenizer.json there (pass a tokenizer folder or its tokenizer.json)"
        )
    config = (
        json.loads((source / "tokenizer_config.json").read_text())
        if (source / "tokenizer_config.json").is_file()
        else {}
    )
    config["chat_template"] = _chat_template(source, config, chat_template)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, output_dir / name)
    (output_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    loaded = AutoTokenizer.from_pretrained(output_dir)
    call_end = tool_call_format(loaded).call_end  # harmony's <|call|> ends a reply with a call
    end_ids = [loaded.convert_tokens_to_ids(token) for token in (turn_end(loaded), call_end) if token]
    if loaded.eos_token_id is not None and loaded.eos_token_id not in end_ids:
        end_ids.append(loaded.eos_token_id)
    pad_id = loaded.pad_token_id if loaded.pad_token_id is not None else end_ids[0]
    bos_id = loaded.bos_token_id if loaded.bos_token_id is not None else pad_id
    model_config = LlamaConfig(
        vocab_size=-(-len(loaded) // 64) * 64,
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=bos_id,
        eos_token_id=end_ids,
        pad_token_id=pad_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(model_config)
    model.generation_config = GenerationConfig(bos_token_id=bos_id, eos_token_id=end_ids, pad_token_id=pad_id)
    model.save_pretrained(output_dir, safe_serialization=True)
    return output_dir


def _chat_template(source: Path, config: dict, chat_template: str | Path | None) -> str:
    if chat_template is not None:
        return Path(chat_template).read_text()
    beside = sorted(source.glob("*.jinja"))
    if len(beside) > 1:
        raise HarnessError(
            f"{source} holds several chat templates ({', '.join(p.name for p in beside)}): pick one with --chat-template"
        )
    if beside:
        return beside[0].read_text()
    if isinstance(config.get("chat_template"), str):
        return config["chat_template"]
    raise HarnessError(
        f"{source} has no chat template (no .jinja file beside tokenizer.json, none in tokenizer_config.json): "
        "pass one with --chat-template FILE"
    )
