"""Real Celery worker processes for the tests that kill one: they use the test database and
the test run's broker (Redis in CI), with Redis redelivering a dead worker's task fast."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.db import connection

from config.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[2]


def need_shared_broker() -> None:
    if celery_app.conf.broker_url.startswith("filesystem://"):
        pytest.skip("needs a broker shared with a worker process (Redis, as in CI)")


def database_url() -> str:
    """The test database's URL, for a child process to use it too."""
    db = connection.settings_dict
    host, port = db["HOST"] or "127.0.0.1", db["PORT"] or 5432
    return f"postgres://{db['USER']}@{host}:{port}/{db['NAME']}"


def start_worker_process(queues: str = "default", batch_size: int = 4) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": celery_app.conf.broker_url,
        # Redis: redeliver a dead worker's task after 3 s, sweeping for such tasks every second
        "CELERY_BROKER_TRANSPORT_OPTIONS": json.dumps(
            {"visibility_timeout": 3, "unacked_restore_interval": 1, "unacked_restore_throttle": 1}
        ),
        "JUDGE_BATCH_SIZE": str(batch_size),
    }
    command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--concurrency=1"]
    return subprocess.Popen(
        [*command, "--pool=prefork", "-Q", queues, "--loglevel=WARNING"],
        cwd=ROOT,
        env=env,
        start_new_session=True,  # its own process group, so a kill takes the pool child too
    )


def wait_until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} not reached in {seconds}s")


def free_port() -> int:
    """A loopback TCP port nothing listens on now, for a server a test starts."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
