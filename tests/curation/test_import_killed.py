"""A process killed (SIGKILL) in the middle of an import leaves no half-written trajectory,
and importing the same file again completes it with no duplicates. Real processes on
PostgreSQL: `manage.py import_trajectories` in a child process, killed once batches land."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db.models import Count, F

from curation.models import Project, Trajectory
from tests.curation.helpers import run_import, write_runs
from tests.workers.processes import database_url

ROOT = Path(__file__).resolve().parents[2]
RUNS = 3000


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_killed_import_leaves_nothing_half_written_and_resumes(tmp_path) -> None:
    path = tmp_path / "runs.jsonl"
    write_runs(path, RUNS)
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "IMPORT_BATCH_SIZE": "100",
    }
    Project.objects.create(slug="killed", name="Killed")
    child = subprocess.Popen(
        [sys.executable, "manage.py", "import_trajectories", str(path), "--project", "killed"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while Trajectory.objects.filter(project__slug="killed").count() < 300:
        assert child.poll() is None, "the import ended before it could be killed"
        assert time.monotonic() < deadline, "no batch landed in time"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()

    landed = Trajectory.objects.filter(project__slug="killed")
    assert 300 <= landed.count() < RUNS
    half_written = landed.annotate(rows=Count("steps")).exclude(rows=F("step_count"))
    assert not half_written.exists()

    code, summary = run_import(path, project="killed")
    assert code == 0
    assert summary["created"] + summary["duplicates"] == RUNS
    assert landed.count() == RUNS
    assert landed.values("external_id").distinct().count() == RUNS
    assert not landed.annotate(rows=Count("steps")).exclude(rows=F("step_count")).exists()
