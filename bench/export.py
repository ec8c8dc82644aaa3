"""Export throughput and peak memory at two dataset sizes (DESIGN.md section 9).

    DATABASE_URL=postgres://... python bench/export.py [--trajectories 1000 100000]
        [--kind sft] [--format jsonl]

For each size it imports N synthetic runs (curation.demo, through the fast importer) into a
project of its own, then, in a fresh process so peak RSS belongs to the export alone, runs one
export of that project end to end (the runs streamed through a server-side cursor, rows built,
deduplicated, split, written, hashed and stored) and prints rows/s with the process's RSS
before and at its peak. The target: peak RSS flat from 1k to 100k runs. The project and the
files are deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def create(slug: str, trajectories: int) -> None:
    """Import the runs (in their own process: the importer's memory is not the export's)."""
    setup_django()
    from curation.demo import demo_records
    from curation.formats.reading import RawItem
    from curation.ingest import import_items
    from curation.models import Project

    project = Project.objects.create(slug=slug, name="Export bench")
    items = (RawItem("bench", f"item {n}", r) for n, r in enumerate(demo_records(trajectories)))
    started = time.perf_counter()
    summary = import_items(project, items)
    print(f"  imported {summary.created:,} runs ({summary.steps:,} steps) "
          f"in {time.perf_counter() - started:.0f} s", file=sys.stderr)  # fmt: skip


def measure(slug: str, kind: str, format_name: str) -> dict:
    setup_django()
    import pyarrow
    from django.db import connection

    from curation.exports.runner import check_request, create_export, run_export
    from curation.models import Project

    pyarrow.array([0])  # Arrow loads its pandas shim on first use: a fixed cost, paid up front

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    project = Project.objects.get(slug=slug)
    spec = check_request(project, kind, format_name, {})
    export = create_export(project, spec, format_name, None)
    start_rss = peak_rss_mb()
    started = time.perf_counter()
    done = run_export(export.pk)
    seconds = time.perf_counter() - started
    if done.status != "done":
        sys.exit(f"export failed: {done.error}")
    return {
        "runs": done.counts["runs_read"],
        "rows": done.counts["rows"],
        "bytes": sum(f["bytes"] for f in done.files),
        "seconds": seconds,
        "start_rss_mb": start_rss,
        "peak_rss_mb": peak_rss_mb(),
    }


def delete(slug: str) -> None:
    setup_django()
    from curation.models import Project

    Project.objects.filter(slug=slug).delete()


def child(*args: str, media: str) -> str:
    env = {**os.environ, "MEDIA_ROOT": media}
    done = subprocess.run(
        [sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env
    )
    if done.returncode:
        sys.exit(f"{' '.join(args)} failed (exit {done.returncode}, see above)")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--kind", default="sft")
    parser.add_argument("--format", default="jsonl", choices=["jsonl", "parquet"])
    parser.add_argument("--step", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.step:
        action, slug, *rest = args.step
        if action == "create":
            create(slug, int(rest[0]))
        elif action == "measure":
            print(json.dumps(measure(slug, args.kind, args.format)))
        else:
            delete(slug)
        return
    if not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        sys.exit("bench/export.py measures streaming from PostgreSQL: set DATABASE_URL.")

    print(f"{args.kind} export to {args.format}, one fresh process per size (RSS in MB)")
    print(f"{'project':>8} {'read':>8} {'rows':>8} {'MB out':>7} {'seconds':>8} {'rows/s':>8} "
          f"{'RSS start':>10} {'RSS peak':>9} {'growth':>7}", flush=True)  # fmt: skip
    for count in args.trajectories:
        slug = f"bench-export-{uuid.uuid4().hex[:12]}"
        with tempfile.TemporaryDirectory(prefix="bench-export-") as media:
            try:
                child("--step", "create", slug, str(count), media=media)
                line = child(
                    "--kind", args.kind, "--format", args.format, "--step", "measure", slug,
                    media=media,
                )  # fmt: skip
            finally:
                child("--step", "delete", slug, media=media)
        r = json.loads(line.splitlines()[-1])
        print(
            f"{count:>8,} {r['runs']:>8,} {r['rows']:>8,} {r['bytes'] / 2**20:>7.1f} "
            f"{r['seconds']:>8.1f} {r['rows'] / r['seconds']:>8,.0f} {r['start_rss_mb']:>10.0f} "
            f"{r['peak_rss_mb']:>9.0f} {r['peak_rss_mb'] - r['start_rss_mb']:>7.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
