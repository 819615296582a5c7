"""Reading a project's declarations: pyproject.toml, an ini file (setup.cfg, tox.ini), setup.py's literals."""

from __future__ import annotations

import ast
import logging
import tomllib
from configparser import ConfigParser
from configparser import Error as ConfigError
from pathlib import Path

from .errors import SynthError

log = logging.getLogger(__name__)


def read_pyproject(root: Path) -> dict:
    path = root / "pyproject.toml"
    try:
        return tomllib.loads(path.read_text()) if path.exists() else {}
    except tomllib.TOMLDecodeError as err:
        raise SynthError(f"{path} is not valid TOML: {err}") from None


def read_ini(path: Path) -> ConfigParser:
    config = ConfigParser(interpolation=None)
    if path.exists():
        try:
            config.read(path)
        except (ConfigError, UnicodeDecodeError) as err:  # a broken file is just skipped
            log.warning("cannot read %s: %s", path, err)
    return config


def setup_py_literals(root: Path) -> dict[str, object]:
    """The keywords setup.py passes to `setup()` as literals (or names bound to literals), by name."""
    path = root / "setup.py"
    try:
        tree = ast.parse(path.read_text(errors="replace")) if path.exists() else ast.Module(body=[], type_ignores=[])
    except SyntaxError:
        return {}
    bound = {
        t.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    found: dict[str, object] = {}
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        if getattr(call.func, "id", getattr(call.func, "attr", "")) != "setup":
            continue
        for keyword in call.keywords:
            value = bound.get(keyword.value.id, keyword.value) if isinstance(keyword.value, ast.Name) else keyword.value
            try:
                found[keyword.arg] = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError):
                continue
    return found
