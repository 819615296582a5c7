"""Checkpoints as users bring them: Hugging Face folders and GGUF files.

A GGUF file (llama.cpp's format, usually quantized) is dequantized by transformers (`gguf_file=`,
which needs the `gguf` package) and written as a plain Hugging Face folder: the loaded model's
weights copied into a fresh model of the same class (a GGUF-loaded model refuses
`save_pretrained`), saved with the tokenizer and chat template the file carries. Every path that
takes a checkpoint (eval, generate, serve, train, run) takes the file too: `resolve_checkpoint`
imports it once into the cache, keyed by the file's content, and hands back that folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from sandboxes.cache_lock import cache_lock
from sandboxes.images import cache_dir

from .errors import HarnessError

DTYPES = ("float32", "bfloat16", "float16")
GGUF_MAGIC = b"GGUF"


class CheckpointError(HarnessError):
    """A checkpoint that cannot be used as it is: the message names what is missing."""


def is_gguf(value: str | Path) -> bool:
    return str(value).lower().endswith(".gguf")


def resolve_checkpoint(value: str, dtype: str = "float32") -> str:
    """A GGUF file becomes the Hugging Face folder imported from it (once, cached by content under
    `$HARNESS_CACHE/gguf/`); any other `--checkpoint` value is returned as it is."""
    if not is_gguf(value):
        return value
    source = _check_gguf_file(Path(value).expanduser())
    target = imported_folder(source, dtype)
    with cache_lock(target):  # two runs given the same file at once: one imports, the other waits and reads it
        if not (target / "config.json").is_file():
            import_gguf(source, target, dtype)
    return str(target)


def imported_folder(source: Path, dtype: str = "float32") -> Path:
    """Where `resolve_checkpoint` keeps the import of the GGUF file `source`: named by its content and `dtype`."""
    with source.open("rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()[:16]
    return cache_dir() / "gguf" / f"{source.stem}-{digest}-{dtype}"


def import_gguf(source: str | Path, output: str | Path, dtype: str = "float32") -> Path:
    """Dequantize the GGUF file `source` into a Hugging Face folder `output` (weights in `dtype`).

    The folder appears whole or not at all: it is written beside `output` and renamed into place.
    An `output` that exists and is not empty is refused, so nothing there is overwritten."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if dtype not in DTYPES:
        raise CheckpointError(f"--dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    source, output = _check_gguf_file(Path(source).expanduser()), Path(output).expanduser()
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise CheckpointError(f"{output} exists and is not an empty folder: choose a new one")
    architecture = gguf_architecture(source)
    try:
        loaded = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    except Exception as err:  # noqa: BLE001 - transformers raises many kinds for a file it cannot read
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

        if "not supported" in str(err):
            raise CheckpointError(
                f"{source}: architecture {architecture!r} is not one transformers loads from GGUF "
                f"(it loads {', '.join(sorted(GGUF_SUPPORTED_ARCHITECTURES))})"
            ) from err
        raise CheckpointError(f"{source}: transformers cannot load its {architecture!r} weights: {err}") from err
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    except Exception as err:  # noqa: BLE001
        raise CheckpointError(
            f"{source}: no usable tokenizer in the GGUF file (its tokenizer.ggml.* keys): {err}"
        ) from err
    config = loaded.config
    for key in (
        "quantization_config",
        "_pre_quantization_dtype",
    ):  # the GGUF origin, which would make the copy refuse saving
        if hasattr(config, key):
            delattr(config, key)
    config.dtype = dtype
    model = type(loaded)(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.to(getattr(torch, dtype))
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    staging.chmod(0o755)
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "harness_import.json").write_text(
            json.dumps({"source": str(source), "architecture": architecture, "dtype": dtype}, indent=1)
        )
        if output.is_dir():
            output.rmdir()
        os.replace(staging, output)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not (output / "config.json").is_file():  # else another process imported the same file first
            raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return output


def gguf_architecture(source: Path) -> str:
    """`general.architecture` of a GGUF file; a clear error when the file is corrupt or truncated."""
    try:
        from gguf import GGUFReader
    except ImportError:
        raise CheckpointError("reading GGUF files needs the gguf package: pip install gguf") from None
    try:
        field = GGUFReader(source).fields["general.architecture"]
        return bytes(field.parts[field.data[0]]).decode()
    except Exception as err:  # noqa: BLE001 - a truncated or corrupt file fails anywhere in the header or tensor table
        raise CheckpointError(f"{source}: a corrupt or truncated GGUF file ({type(err).__name__}: {err})") from err


def _check_gguf_file(path: Path) -> Path:
    if not path.is_file():
        raise CheckpointError(f"{path}: no such GGUF file")
    with path.open("rb") as f:
        if f.read(4) != GGUF_MAGIC:
            raise CheckpointError(f"{path}: not a GGUF file (it does not start with the GGUF magic bytes)")
    return path


def template_warnings(tokenizer) -> list[str]:
    """What a checkpoint's chat template lacks for agent episodes, one sentence each (empty when nothing)."""
    from .tool_prompt import takes_tools

    if not getattr(tokenizer, "chat_template", None):
        return ["the checkpoint has no chat template (tokenizer_config.json or chat_template.jinja): add one"]
    if not takes_tools(tokenizer):
        return [
            "its chat template takes no tools: the harness's own tool prompt (<tool_call> JSON in the system turn) is used"
        ]
    return []
