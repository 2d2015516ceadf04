"""Store configs say where their data lives, never with a password, and whether it
outlives the process."""

from __future__ import annotations

import pytest

from megaflow.storage.config import (
    LocalArtifactsConfig,
    MemoryMetadataConfig,
    MongoMetadataConfig,
    PostgresMetadataConfig,
    S3ArtifactsConfig,
    SqliteMetadataConfig,
)


def test_sqlite_file_is_kept_and_named() -> None:
    cfg = SqliteMetadataConfig(path="/data/m.db")
    assert (cfg.where(), cfg.kept()) == ("at /data/m.db", True)


@pytest.mark.parametrize("cfg", [SqliteMetadataConfig(path=":memory:"), MemoryMetadataConfig()])
def test_metadata_in_memory_is_not_kept(cfg: SqliteMetadataConfig | MemoryMetadataConfig) -> None:
    assert (cfg.where(), cfg.kept()) == ("in this process's memory", False)


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://mf:s3cret@db:5432/megaflow", "postgresql://mf:***@db:5432/megaflow"),
        ("host=db user=mf password=s3cret dbname=m", "host=db user=mf password=***"),
        ("host=db password = 'a b' dbname=m", "host=db password = *** dbname=m"),
        ("postgresql://db/megaflow", "postgresql://db/megaflow"),
    ],
)
def test_postgres_address_hides_its_password(dsn: str, shown: str) -> None:
    where = PostgresMetadataConfig(dsn=dsn).where()
    assert where.startswith(f"at {shown}")
    assert "s3cret" not in where
    assert "a b" not in where
    assert where.endswith(", schema megaflow")


def test_mongo_address_hides_its_password() -> None:
    cfg = MongoMetadataConfig(uri="mongodb://mf:pw%40x@h1:27017,h2/?replicaSet=rs", database="d")
    assert cfg.where() == "at mongodb://mf:***@h1:27017,h2/?replicaSet=rs, database d"
    assert cfg.kept()


def test_artifacts_name_the_place_of_a_key() -> None:
    assert LocalArtifactsConfig(root="arts/").where("runs/r1/") == "arts/runs/r1/"
    s3 = S3ArtifactsConfig(bucket="arts", prefix="p/", endpoint_url="http://127.0.0.1:9000")
    assert s3.where("runs/r1/") == "s3://arts/p/runs/r1/ at http://127.0.0.1:9000"
