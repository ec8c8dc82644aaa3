"""Shared fixtures. PostgreSQL-only tests carry the `postgres` mark; tests that read
../shared/data carry `shared_data`; both skip with the reason where their need is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.db import connection

SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    on_postgres = connection.vendor == "postgresql"
    if os.environ.get("CI") and not on_postgres:
        raise pytest.UsageError(
            "CI must run the suite on PostgreSQL: set DATABASE_URL (see .ci/run)"
        )
    for item in items:
        if "postgres" in item.keywords and not on_postgres:
            item.add_marker(
                pytest.mark.skip(
                    reason=f"needs PostgreSQL; DATABASE_URL points at {connection.vendor}"
                )
            )
        if "shared_data" in item.keywords and not SHARED_DATA.is_dir():
            item.add_marker(
                pytest.mark.skip(reason=f"{SHARED_DATA} is absent (real runs not here)")
            )


@pytest.fixture
def shared_data() -> Path:
    return SHARED_DATA


@pytest.fixture
def project(db):
    from curation.models import Project

    return Project.objects.create(slug="demo", name="Demo")


@pytest.fixture(autouse=True)
def empty_cache() -> None:
    """Throttle and login-failure counters live in the cache: each test starts with none."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def media_in_tmp(settings, tmp_path: Path) -> None:
    """Uploaded files of a test go to its own temporary folder."""
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture(autouse=True, scope="session")
def broker_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The embedded (filesystem) broker of a test run gets its own folders, so tests never
    queue work for a `make run` worker on this machine."""
    from config.celery import app

    if app.conf.broker_url.startswith("filesystem://"):
        folder = tmp_path_factory.mktemp("broker")
        for name in ("queue", "control"):
            (folder / name).mkdir()
        app.conf.broker_transport_options = {
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "control_folder": str(folder / "control"),
        }
