"""MkDocs hooks: the CLI and config reference pages, generated from the code at every build.

`reference/cli.md` comes from the Typer app (`cli.app`, through Typer's own documentation command), `reference/config.md` from the pydantic models of
`trainer.config_schema` and the `#:` comments above their fields, so neither can drift from what the code accepts."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]


def on_files(files, config):
    for name, render in (("reference/cli.md", cli_reference), ("reference/config.md", config_reference)):
        files.append(File.generated(config, name, content=render()))
    return files


# ----------------------------------------------------------------------------- the CLI


def cli_reference() -> str:
    """Typer's own Markdown for the `harness` app (`typer cli utils docs`), every command and option."""
    done = subprocess.run(
        [sys.executable, "-m", "typer", "cli", "utils", "docs", "--name", "harness", "--title", "CLI reference"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if done.returncode != 0:
        raise RuntimeError(f"typer could not document the harness command: {done.stderr[-2000:]}")
    return done.stdout


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


# ----------------------------------------------------------------------------- the training config


def config_reference() -> str:
    from pydantic import BaseModel

    from trainer.config_schema import TrainConfig

    lines = [
        "# Training config reference",
        "",
        "Every key `harness train` reads, generated from the pydantic models in `trainer/config_schema.py`. "
        "Keys are given as dotted paths, as on the command line (`harness train --config X trainer.epochs=5`); "
        "SkyRL's spellings of them are in [SkyRL configs](../skyrl.md).",
        "",
    ]

    def section(model: type[BaseModel], prefix: str) -> None:
        docs = _field_comments(model)
        leaves, nested = [], []
        for name, field in model.model_fields.items():
            if field.exclude:
                continue
            annotation = field.annotation
            if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
                nested.append((name.removesuffix("_"), annotation))  # YAML spells `async_` as `async`
            else:
                leaves.append((name, field))
        if leaves:
            lines.extend(
                [
                    f"## `{prefix or 'top level'}`" if prefix else "## Top level",
                    "",
                    "| key | type | default | description |",
                    "|---|---|---|---|",
                ]
            )
            for name, field in leaves:
                key = f"{prefix}.{name}" if prefix else name
                lines.append(
                    f"| `{key}` | {_cell(_type_name(field.annotation))} | {_cell(_value(field))} | "
                    f"{_cell(docs.get(name, ''))} |"
                )
            lines.append("")
        for name, model_type in nested:
            section(model_type, f"{prefix}.{name}" if prefix else name)

    section(TrainConfig, "")
    return "\n".join(lines) + "\n"


def _field_comments(model) -> dict[str, str]:
    """Field name -> the `#:` comment lines right above its definition in the class body."""
    found: dict[str, str] = {}
    pending: list[str] = []
    for line in inspect.getsource(model).splitlines():
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        match = re.match(r"(\w+)\s*:", stripped)
        if match and pending:
            found[match.group(1)] = " ".join(pending)
        pending = []
    return found


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Annotated:
        return _type_name(get_args(annotation)[0])
    if origin is Literal:
        return " | ".join(f"`{value}`" for value in get_args(annotation))
    if origin is not None:
        args = [a for a in get_args(annotation) if a is not type(None)]
        inner = ", ".join(_type_name(a) for a in args)
        prefix = getattr(origin, "__name__", str(origin).replace("typing.", ""))
        optional = type(None) in get_args(annotation)
        shown = inner if prefix in ("Union", "UnionType") else f"{prefix}[{inner}]"
        return f"{shown} or null" if optional else shown
    return getattr(annotation, "__name__", str(annotation))


def _value(field) -> str:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    return f"`{json.dumps(value, default=str)}`"
