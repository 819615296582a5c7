"""Registries: the places users add to (task kinds, tools, reward functions, policies, advantage estimators).

A name is looked up in this order:

1. what was registered in this process (built-ins, and whatever a plugin module registered on import);
2. a `module:Name` path (`my_envs.sql:SQLKind`), imported on first use;
3. the registry's Python entry-point group (e.g. `harness.task_kinds`), for installed packages.

Plugins are modules imported for their registrations: `--plugin MODULE` on the command line or
`plugins: [MODULE, ...]` in a training YAML. `load_plugins` remembers them in `HARNESS_PLUGINS`,
so processes started later (Ray workers) import the same modules (`load_env_plugins`).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from .errors import InfraError

T = TypeVar("T")
PLUGINS_ENV = "HARNESS_PLUGINS"


class RegistryError(InfraError):
    """An unknown name, a `module:Name` that cannot be imported, or a name registered twice."""


class Registry(Generic[T]):
    def __init__(self, what: str, group: str, convert: Callable[[str, Any], T] | None = None):
        self.what = what  # "task kind", "tool", ... (used in messages)
        self.group = group  # the entry-point group
        self.convert = convert or (lambda name, obj: obj)  # turns what a path or entry point names into a T
        self._items: dict[str, T] = {}
        self._found: dict[str, T] = {}  # module:Name paths and entry points, resolved once

    def register(self, name: str, item: Any = None, *, replace: bool = False):
        """`registry.register(name, item)`, or `@registry.register(name)` on a function or class."""
        if item is None:
            return lambda obj: (self.register(name, obj, replace=replace), obj)[1]
        converted = self.convert(name, item)
        if name in self._items and not replace and _origin(self._items[name]) != _origin(converted):
            raise RegistryError(f"{self.what} {name!r} is already registered (pass replace=True to override it)")
        self._items[name] = converted  # the same definition again (its module imported anew) replaces it
        return item

    def get(self, name: str) -> T:
        if name in self._items:
            return self._items[name]
        if name in self._found:
            return self._found[name]
        if ":" in name:
            self._found[name] = self.convert(name, import_path(name, self.what))
            return self._found[name]
        for point in entry_points(group=self.group):
            if point.name == name:
                self._found[name] = self.convert(name, point.load())
                return self._found[name]
        raise RegistryError(
            f"unknown {self.what} {name!r}; registered: {', '.join(self.names()) or 'none'}. "
            f"Name your own as module:Name, install it under the entry-point group {self.group!r}, "
            "or import the module that registers it with --plugin / `plugins:`"
        )

    def __contains__(self, name: str) -> bool:
        try:
            self.get(name)
        except RegistryError:
            return False
        return True

    def names(self) -> list[str]:
        return sorted(self._items)


def _origin(obj: Any) -> tuple[str, str] | None:
    """Where a registered thing was defined (module, qualified name), or None when that is unknown."""
    for candidate in (obj, getattr(obj, "environment", None), getattr(obj, "run", None)):
        if candidate is not None and hasattr(candidate, "__qualname__"):
            return candidate.__module__, candidate.__qualname__
    return None


def import_path(path: str, what: str = "object") -> Any:
    """The object a `module:Name` (or `module:Outer.Inner`) path names."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise RegistryError(f"{what} {path!r}: expected module:Name")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as err:
        raise RegistryError(f"{what} {path!r}: cannot import {module_name!r} ({err}); is it on PYTHONPATH?") from None
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise RegistryError(f"{what} {path!r}: module {module_name!r} has no {attribute!r}")
        obj = getattr(obj, part)
    return obj


def load_plugins(modules: Iterable[str]) -> list[str]:
    """Import plugin modules (each registers what it brings) and remember them for child processes."""
    loaded = [m for m in (os.environ.get(PLUGINS_ENV) or "").split(",") if m]
    for module in modules:
        if module in sys.modules and module in loaded:
            continue
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise RegistryError(f"plugin {module!r} cannot be imported ({err}); is it on PYTHONPATH?") from None
        if module not in loaded:
            loaded.append(module)
    os.environ[PLUGINS_ENV] = ",".join(loaded)
    return loaded


def load_env_plugins() -> list[str]:
    """Import the plugins a parent process loaded (called where Ray workers start)."""
    return load_plugins([m for m in (os.environ.get(PLUGINS_ENV) or "").split(",") if m])
