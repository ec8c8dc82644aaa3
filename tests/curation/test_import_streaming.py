"""Large files are read as a stream and written in batches.

Reading: the peak memory while iterating 20,000 records stays near that of 2,000 records (a
reader holding the file would grow ten times). Writing: the number of queries follows the
number of batches, not the number of records or steps.
"""

from __future__ import annotations

import gzip
import io
import json
import tracemalloc
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import Count, F
from django.test.utils import CaptureQueriesContext

from curation.formats.reading import decompressed, iter_stream
from curation.ingest import import_items
from curation.models import Project, Step, Trajectory

SMALL, LARGE = 2_000, 20_000
PADDING = "x" * 200  # makes each record ~0.5 kB, so a file held in memory would show


def record(n: int) -> dict:
    return {
        "id": f"run-{n}",
        "task": {"id": f"task-{n % 50}"},
        "steps": [
            {"role": "user", "content": f"question {n} {PADDING}"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": f"c{n}", "name": "look", "arguments": {"n": n}}],
            },
            {"role": "tool", "tool_call_id": f"c{n}", "content": "found"},
        ],
    }


def write(path: Path, count: int) -> Path:
    """A JSON Lines file, a JSON array file or a gzipped JSON Lines file of `count` records."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as out:
        if path.name.endswith(".json"):
            out.write("[\n")
            for n in range(count):
                out.write(("," if n else "") + json.dumps(record(n)) + "\n")
            out.write("]\n")
        else:
            for n in range(count):
                out.write(json.dumps(record(n)) + "\n")
    return path


def peak_while_reading(path: Path) -> tuple[int, int]:
    """(records read, peak bytes allocated while iterating the file)."""
    count = 0
    with open(path, "rb") as raw:
        tracemalloc.start()
        try:
            for item in iter_stream(decompressed(path, raw), str(path)):
                assert not item.error
                count += 1
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return count, peak


@pytest.mark.parametrize("name", ["runs.jsonl", "runs.json", "runs.jsonl.gz"])
def test_reading_a_large_file_does_not_hold_it_in_memory(tmp_path, name):
    small = write(tmp_path / f"small-{name}", SMALL)
    large = write(tmp_path / f"large-{name}", LARGE)
    small_count, small_peak = peak_while_reading(small)
    large_count, large_peak = peak_while_reading(large)
    assert (small_count, large_count) == (SMALL, LARGE)
    # The file is ten times larger; memory must stay nearly flat.
    assert large_peak < 2 * small_peak, (small_peak, large_peak)
    # ... and well below the size of the data itself.
    with open(large, "rb") as raw:
        size = len(decompressed(large, raw).read())
    assert large_peak < size / 5, (large_peak, size)


def import_counting_queries(project, path: Path, batch_size: int) -> tuple[dict, list[str]]:
    """The import's summary and the SQL of every query it sent through Django."""
    with open(path, "rb") as raw, CaptureQueriesContext(connection) as captured:
        summary = import_items(project, iter_stream(raw, str(path)), batch_size=batch_size)
    return summary.as_dict(), [q["sql"] for q in captured.captured_queries]


@pytest.mark.django_db
def test_importing_a_large_file_writes_in_batches(project, tmp_path):
    path = write(tmp_path / "large.jsonl", LARGE)
    batch_size = 2_000
    batches = LARGE // batch_size

    summary, queries = import_counting_queries(project, path, batch_size)

    assert summary["failed"] == 0
    assert (summary["created"], summary["steps"]) == (LARGE, 3 * LARGE)
    assert Trajectory.objects.filter(project=project).count() == LARGE
    assert Step.objects.filter(trajectory__project=project).count() == 3 * LARGE
    counted = Trajectory.objects.annotate(n=Count("steps"))
    assert not counted.exclude(step_count=F("n")).exists()
    # 20,000 trajectories and 60,000 steps in a few statements per batch, never one per
    # record or step. SQLite splits a bulk insert into statements of some hundred rows;
    # PostgreSQL takes a batch's trajectory ids in one query and COPYs its trajectories and
    # steps (COPY is not logged by Django, so no INSERT into either table may show).
    writes = [q for q in queries if q.lstrip().upper().startswith(("INSERT", "COPY"))]
    assert len(queries) < LARGE / 10, len(queries)
    assert len(writes) < LARGE / 20, len(writes)
    trajectory_inserts = [q for q in writes if Trajectory._meta.db_table in q.split("(")[0]]
    if connection.vendor == "postgresql":
        assert len([q for q in queries if "nextval" in q]) == batches
        assert not trajectory_inserts
        assert not any(Step._meta.db_table in q.split("(")[0] for q in writes)
    else:
        assert batches <= len(trajectory_inserts) < LARGE / 20


def import_into_new_project(slug: str, path: Path, batch_size: int) -> int:
    project = Project.objects.create(slug=slug, name=slug)
    summary, queries = import_counting_queries(project, path, batch_size)
    assert summary["failed"] == 0 and summary["created"] > 0
    return len(queries)


@pytest.mark.django_db
def test_the_number_of_queries_follows_batches_not_records_or_steps(tmp_path):
    # Batches small enough (at most 40 records, 360 steps) that SQLite never splits a statement.
    a = write(tmp_path / "a.jsonl", 600)
    more_steps = tmp_path / "b.jsonl"
    with open(more_steps, "w") as out:
        for n in range(600):
            longer = record(n)
            longer["steps"] = longer["steps"] * 3  # nine steps instead of three
            out.write(json.dumps(longer) + "\n")
    more_records = write(tmp_path / "c.jsonl", 800)
    twice = write(tmp_path / "d.jsonl", 1_200)

    baseline = import_into_new_project("a", a, batch_size=30)  # 20 batches
    assert baseline <= 20 * 10  # a handful of statements a batch, not one per record
    # Three times the steps, same batches: same queries.
    assert import_into_new_project("b", more_steps, batch_size=30) == baseline
    # A third more records, same number of batches: same queries.
    assert import_into_new_project("c", more_records, batch_size=40) == baseline
    # Twice the batches: about twice the queries.
    doubled = import_into_new_project("d", twice, batch_size=30)
    assert 1.8 * baseline < doubled <= 2 * baseline


@pytest.mark.django_db
def test_a_second_import_of_a_large_file_reads_no_row_twice(project, tmp_path):
    path = write(tmp_path / "runs.json", 5_000)
    import_counting_queries(project, path, batch_size=1_000)
    summary, queries = import_counting_queries(project, path, batch_size=1_000)
    assert (summary["created"], summary["duplicates"]) == (0, 5_000)
    assert len(queries) == 5  # one duplicate lookup per batch, nothing written


@pytest.mark.django_db
def test_the_command_streams_a_large_gzipped_file(tmp_path):
    path = write(tmp_path / "runs.jsonl.gz", 5_000)
    out = io.StringIO()
    call_command(
        "import_trajectories", str(path), project="big", json=True, batch_size=500, stdout=out
    )
    summary = json.loads(out.getvalue())
    assert (summary["created"], summary["steps"], summary["failed"]) == (5_000, 15_000, 0)
