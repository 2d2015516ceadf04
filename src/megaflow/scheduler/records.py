"""Fast construction of the records the attempt runner emits on every attempt.

``Attempt`` and ``TaskFinished`` are built from values the scheduler itself
produced (already of the right types), so they skip validation. pydantic's
``model_construct`` still resolves every default per call; :func:`trusted`
resolves a model's fields and constant defaults once into a template dict,
copies it per call, and calls default factories only for fields not given.
Models with private attributes or a post-init hook fall back to
``model_construct``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class _Template:
    base: dict[str, Any]
    """Every field in declaration order (the order ``__dict__`` and dumps keep),
    holding its constant default, or ``_MISSING`` for required fields and
    fields with a factory."""
    names: frozenset[str]
    required: frozenset[str]
    factories: tuple[tuple[str, Callable[[], Any]], ...]


_TEMPLATES: dict[type[BaseModel], _Template | None] = {}
_IMMUTABLE = (str, int, float, bool, bytes, type(None), tuple, frozenset)
_set = object.__setattr__


def _template(cls: type[BaseModel]) -> _Template | None:
    if cls.__private_attributes__ or cls.__pydantic_post_init__ is not None:
        return None
    if cls.model_config.get("extra") == "allow":
        return None
    base: dict[str, Any] = {}
    required: list[str] = []
    factories: list[tuple[str, Callable[[], Any]]] = []
    for name, info in cls.model_fields.items():
        base[name] = _MISSING
        if info.is_required():
            required.append(name)
        elif info.default_factory is not None:
            if info.default_factory_takes_validated_data:
                return None
            factories.append((name, info.default_factory))  # type: ignore[arg-type]
        elif isinstance(info.default, _IMMUTABLE):
            base[name] = info.default
        else:
            factories.append((name, partial(info.get_default, call_default_factory=True)))
    return _Template(base, frozenset(base), frozenset(required), tuple(factories))


def trusted(cls: type[M], **values: Any) -> M:
    """``cls.model_construct(**values)``, faster: for values known to be valid."""
    try:
        tpl = _TEMPLATES[cls]
    except KeyError:
        tpl = _TEMPLATES[cls] = _template(cls)
    if tpl is None or not tpl.names >= values.keys():
        return cls.model_construct(**values)  # unknown names: as pydantic does it
    data = tpl.base.copy()
    data.update(values)  # keys already present keep their declaration order
    for name, factory in tpl.factories:
        if name not in values:
            data[name] = factory()
    if not tpl.required <= values.keys():
        for name in tpl.required - values.keys():
            del data[name]  # model_construct leaves a missing required field unset
    m = cls.__new__(cls)
    _set(m, "__dict__", data)
    _set(m, "__pydantic_fields_set__", set(values))
    _set(m, "__pydantic_extra__", None)
    _set(m, "__pydantic_private__", None)
    return m
