"""Configs pick the Redis and S3 backends, with their settings, lazily."""

import pytest
from pydantic import ValidationError

from megaflow.storage.config import StorageConfig
from megaflow.storage.factory import Stores
from megaflow.storage.redis_bus import RedisEventBus
from megaflow.storage.redis_queue import RedisTaskQueue
from megaflow.storage.retrying import RetryingArtifactStore, RetryingEventBus, RetryingTaskQueue
from megaflow.storage.s3_artifacts import S3ArtifactStore


def test_redis_and_s3_are_chosen_by_type() -> None:
    cfg = StorageConfig.model_validate(
        {
            "queue": {"type": "redis", "url": "redis://q:1/0", "namespace": "run-7",
                      "claim_after_s": 5, "consumer": "sched-a"},
            "events": {"type": "redis", "url": "redis://e:2", "cluster": True, "max_len": 500,
                       "stale_after_s": 60},
            "artifacts": {"type": "s3", "bucket": "arts", "prefix": "runs/",
                          "endpoint_url": "http://s3:9000", "multipart_threshold": 1000},
        }
    )  # fmt: skip
    stores = Stores.from_config(cfg)  # builds, but connects only on start()
    # each backend behind the wrapper that waits out its transient faults
    assert isinstance(stores.queue, RetryingTaskQueue)
    assert isinstance(stores.events, RetryingEventBus)
    assert isinstance(stores.artifacts, RetryingArtifactStore)
    q, ev, art = stores.queue.inner, stores.events.inner, stores.artifacts.inner
    assert isinstance(q, RedisTaskQueue)
    assert (q.url, q.prefix, q.consumer, q.claim_after_ms) == (
        "redis://q:1/0", "{megaflow:run-7}:", "sched-a", 5000,
    )  # fmt: skip
    assert isinstance(ev, RedisEventBus)
    assert (ev.cluster, ev.stream, ev.max_len, ev.stale_after_s) == (
        True, "{megaflow:default}:events", 500, 60,
    )  # fmt: skip
    assert isinstance(art, S3ArtifactStore)
    assert (art.bucket, art.prefix, art.multipart_threshold) == ("arts", "runs/", 1000)


@pytest.mark.parametrize(
    "storage",
    [
        {"queue": {"type": "redis", "namespace": "has{brace}"}},
        {"queue": {"type": "redis", "claim_after_s": -1}},
        {"events": {"type": "redis", "unknown": 1}},
        {"artifacts": {"type": "s3"}},  # no bucket
        {"artifacts": {"type": "s3", "bucket": "b", "part_size": 1024}},
    ],
)
def test_bad_backend_settings_fail_validation(storage: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        StorageConfig.model_validate(storage)
