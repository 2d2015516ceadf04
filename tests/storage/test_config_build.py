"""Every store config builds its own backend; the factory has no type switch."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from megaflow.storage import abstract, config, factory

UNIONS = {
    config.MetadataConfig: abstract.MetadataStore,
    config.QueueConfig: abstract.TaskQueue,
    config.EventsConfig: abstract.EventBus,
    config.ArtifactsConfig: abstract.ArtifactStore,
}
REQUIRED: dict[str, dict[str, object]] = {"S3ArtifactsConfig": {"bucket": "arts"}}


def members(union: object) -> tuple[type, ...]:
    return typing.get_args(typing.get_args(union)[0])


@pytest.mark.parametrize(
    ("cls", "base"), [(c, b) for u, b in UNIONS.items() for c in members(u)], ids=str
)
def test_each_member_builds_through_its_own_method(cls: type, base: type) -> None:
    assert "build" in vars(cls)
    store = cls(**REQUIRED.get(cls.__name__, {})).build()  # connects only on start()
    assert isinstance(store, base)


def test_factory_has_no_type_switch() -> None:
    assert "isinstance" not in Path(factory.__file__).read_text()
