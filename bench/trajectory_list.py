"""Server time of the trajectory list at 100k trajectories: first and deep pages, filters.

    DATABASE_URL=postgres://... python bench/trajectory_list.py [--trajectories 100000]

Needs a migrated database. It imports N short synthetic runs (two steps each, a quarter of the
failures with a gold label) into its own project through the normal importer, renders the
project page through django.test.Client as a superuser for several filters, on the first page
and on a page deep in the list (`?after=` near the end: keyset pagination must not slow down
there), prints p50/p95 per case and the query count, then deletes the project.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "no filter": "",
    "outcome=failure": "outcome=failure",
    "effective verdict + source": "verdict=failure&source=human",
    "category": "category=wrong_tool",
    "annotated=no": "annotated=no",
    "text search (common word)": "q=refund",
    "text search (no match)": "q=nowhere",
}


def records(count: int):
    for n in range(count):
        failed = n % 3 == 0
        record = {
            "id": f"run-{n}",
            "task": {"id": f"task-{n % 500}"},
            "agent": {"model": ("gpt-4o", "qwen2.5-7b")[n % 2]},
            "steps": [
                {"role": "user", "content": f"Please refund order {n}."},
                {"role": "assistant", "content": "Done." if not failed else "I can't."},
            ],
            "outcome": {"success": not failed},
        }
        if failed and n % 4 == 0:
            record["labels"] = {
                "verdict": "failure",
                "first_critical_step": 1,
                "category": "wrong_tool",
            }
        yield record


def timed(queries: list):
    """A Django execute wrapper that records (milliseconds, SQL) of each query."""

    def wrapper(execute, sql, params, many, context):
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            queries.append(((time.perf_counter() - start) * 1000, sql))

    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--explain", action="store_true", help="show the slowest queries")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from curation.formats.reading import RawItem
    from curation.ingest import import_items
    from curation.models import Project

    tag = uuid.uuid4().hex[:12]
    project = Project.objects.create(slug=f"bench-list-{tag}", name="List bench")
    user = User.objects.create_superuser(f"bench-{tag}", password=None)
    try:
        started = time.perf_counter()
        items = (RawItem("bench", f"item {n}", r) for n, r in enumerate(records(args.trajectories)))
        summary = import_items(project, items)
        print(f"imported {summary.created:,} runs in {time.perf_counter() - started:.1f} s")
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("ANALYZE")
        deep = project.trajectories.order_by("-id").values_list("id", flat=True)[100]
        client = Client()
        client.force_login(user)
        base = f"/p/{project.slug}/"
        print(f"{'case':<30} {'page':<6} {'p50 ms':>8} {'p95 ms':>8} {'queries':>8}")
        for name, query in CASES.items():
            for page, extra in (("first", ""), ("deep", f"after={deep}")):
                url = f"{base}?{'&'.join(p for p in (query, extra) if p)}"
                queries: list[tuple[float, str]] = []
                with connection.execute_wrapper(timed(queries)):
                    assert client.get(url).status_code == 200
                times = []
                for _ in range(args.requests):
                    start = time.perf_counter()
                    client.get(url)
                    times.append((time.perf_counter() - start) * 1000)
                p50 = statistics.median(times)
                p95 = statistics.quantiles(times, n=20, method="inclusive")[18]
                print(f"{name:<30} {page:<6} {p50:>8.1f} {p95:>8.1f} {len(queries):>8}")
                if args.explain:
                    for ms, sql in sorted(queries, reverse=True)[:2]:
                        print(f"    {ms:7.1f} ms  {sql[:150]}")
    finally:
        project.delete()
        user.delete()


if __name__ == "__main__":
    main()
