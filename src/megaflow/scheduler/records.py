"""Fast construction of the records the attempt runner emits on every attempt.

``Attempt`` and ``TaskFinished`` are built from values the scheduler itself
produced (already of the right types), so they skip validation. pydantic's
``model_construct`` still resolves every default per call; :func:`trusted`
resolves a model's fields and constant defaults once, and calls default
factories only for fields not given. Models with private attributes or a
post-init hook fall back to ``model_construct``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_MISSING = object()
_Field = tuple[str, Any, Callable[[], Any] | None]
_TEMPLATES: dict[type[BaseModel], tuple[_Field, ...] | None] = {}
_IMMUTABLE = (str, int, float, bool, bytes, type(None), tuple, frozenset)
_set = object.__setattr__


def _template(cls: type[BaseModel]) -> tuple[_Field, ...] | None:
    """The fields in declaration order (the order ``__dict__`` and dumps keep),
    each with its constant default or its factory."""
    if cls.__private_attributes__ or cls.__pydantic_post_init__ is not None:
        return None
    if cls.model_config.get("extra") == "allow":
        return None
    fields: list[_Field] = []
    for name, info in cls.model_fields.items():
        if info.is_required():
            fields.append((name, _MISSING, None))
        elif info.default_factory is not None:
            if info.default_factory_takes_validated_data:
                return None
            fields.append((name, None, info.default_factory))  # type: ignore[arg-type]
        elif isinstance(info.default, _IMMUTABLE):
            fields.append((name, info.default, None))
        else:
            fields.append((name, None, partial(info.get_default, call_default_factory=True)))
    return tuple(fields)


def trusted(cls: type[M], **values: Any) -> M:
    """``cls.model_construct(**values)``, faster: for values known to be valid."""
    try:
        tpl = _TEMPLATES[cls]
    except KeyError:
        tpl = _TEMPLATES[cls] = _template(cls)
    if tpl is None:
        return cls.model_construct(**values)
    data: dict[str, Any] = {}
    for name, default, factory in tpl:
        if name in values:
            data[name] = values[name]
        elif factory is not None:
            data[name] = factory()
        elif default is not _MISSING:
            data[name] = default
    m = cls.__new__(cls)
    _set(m, "__dict__", data)
    _set(m, "__pydantic_fields_set__", set(values))
    _set(m, "__pydantic_extra__", None)
    _set(m, "__pydantic_private__", None)
    return m
