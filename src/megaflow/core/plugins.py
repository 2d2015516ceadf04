"""The one loader for plug-ins given by dotted path (``package.module.Class``)."""

from __future__ import annotations

import importlib
from typing import Any, TypeVar

from megaflow.core.errors import PluginError

T = TypeVar("T")


def load_object(path: str) -> Any:
    """Import ``package.module.Name`` (or ``package.module:Name``) and return ``Name``."""
    module_name, sep, attr = path.replace(":", ".").rpartition(".")
    if not sep or not module_name or not attr:
        raise PluginError(f"plug-in path {path!r} must look like 'package.module.Name'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginError(
            f"cannot import module {module_name!r} for plug-in {path!r}: {exc}. "
            "Is it installed, or on PYTHONPATH?"
        ) from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise PluginError(f"module {module_name!r} has no attribute {attr!r}") from None


def load_class(path: str, base: type[T]) -> type[T]:
    """Load a class by dotted path and check that it subclasses ``base``."""
    obj = load_object(path)
    if not isinstance(obj, type) or not issubclass(obj, base):
        raise PluginError(f"plug-in {path!r} is not a subclass of {base.__name__}")
    return obj
