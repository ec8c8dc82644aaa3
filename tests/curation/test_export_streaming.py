"""Exports stream: one cursor over the runs (server-side on PostgreSQL) and a fixed number of
queries per batch, so the work and memory of a batch do not grow with the dataset."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from curation.exports.reading import stream
from curation.exports.runner import check_request, create_export, run_export
from curation.models import Project, Trajectory
from tests.curation.export_helpers import load, record

pytestmark = pytest.mark.django_db

CHUNK = 10
# per batch: its steps, its tool schemas, the progress update
SFT_QUERIES_PER_BATCH = 3


def run(project: Project, kind: str = "sft", after_batch=None) -> tuple[int, list[str]]:
    spec = check_request(project, kind, "jsonl", {})
    export = create_export(project, spec, "jsonl", None)
    with CaptureQueriesContext(connection) as queries:
        done = run_export(export.pk, chunk_size=CHUNK, after_batch=after_batch)
    assert done.status == "done", done.error
    return done.counts["rows"], [q["sql"] for q in queries.captured_queries]


def runs_query(sql: list[str]) -> list[str]:
    return [q for q in sql if 'SELECT "curation_trajectory"."id" AS "id"' in q]


def test_queries_grow_with_batches_not_with_runs(project):
    load(project, [record(n, f"t{n}", True) for n in range(30)])
    rows_small, small = run(project)
    load(project, [record(n, f"t{n}", True) for n in range(30, 60)])
    rows_big, big = run(project)

    assert (rows_small, rows_big) == (30, 60)
    assert len(big) - len(small) == 3 * SFT_QUERIES_PER_BATCH  # three more batches of ten
    assert len(runs_query(small)) == len(runs_query(big)) == 1  # one pass over the runs
    steps = [q for q in big if 'FROM "curation_step"' in q]
    assert len(steps) == 6  # one query for each batch's steps


@pytest.mark.postgres
def test_runs_are_read_through_a_server_side_cursor(project):
    load(project, [record(n, f"t{n}", True) for n in range(35)])
    open_cursors: list[int] = []

    def look(done: int) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_cursors WHERE statement LIKE %s",
                ["%curation_trajectory%"],
            )
            open_cursors.append(cursor.fetchone()[0])

    rows, sql = run(project, after_batch=look)
    assert rows == 35
    [runs] = runs_query(sql)
    assert runs.startswith("DECLARE")
    assert open_cursors == [1, 1, 1, 0]  # open while reading, closed after the last row


def test_preference_batches_keep_each_task_whole(project):
    load(project, [record(n, f"t{n // 3}", n % 3 == 0) for n in range(30)])
    queryset = Trajectory.objects.filter(project=project)
    batches = list(stream(queryset, chunk_size=4, by_task=True))
    tasks = [[run.task for run in batch] for batch in batches]
    seen: set[str] = set()
    for batch in tasks:
        assert not seen & set(batch)  # a task never continues into a later batch
        seen |= set(batch)
    assert sum(len(b) for b in tasks) == 30
    assert all(len(b) <= 4 + 2 for b in tasks)
