"""Import throughput against a raw PostgreSQL COPY of the same step rows (DESIGN.md section 9).

    DATABASE_URL=postgres://... python bench/ingest.py [--trajectories 2000 8000]
        [--steps-per-trajectory 25] [--repeat 3] [--profile]

For each size it writes N synthetic runs (curation.demo) to a JSONL file, then, in a fresh
process so peak RSS is per size: imports the file with `import_trajectories` into a new project
(timed end to end), builds the same step rows the importer wrote, deletes the imported steps and
COPYs those rows back into the same table with psycopg (timed for the COPY only), and deletes
the project. The target is import steps/s >= 0.5 x COPY steps/s, with flat peak RSS across sizes.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 0.5


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def write_file(path: Path, trajectories: int, steps: int) -> None:
    from curation.demo import demo_records

    with open(path, "w", encoding="utf-8") as out:
        for record in demo_records(trajectories, steps=(steps, steps)):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def measure(path: Path, profile: bool) -> dict:
    """Import `path`, COPY the same rows, clean up; runs in its own process."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from curation.canonical import validate
    from curation.models import Project, Step, Trajectory
    from curation.storage import STEP_COLUMNS, encode

    slug = f"bench-ingest-{uuid.uuid4().hex[:12]}"
    start_rss = peak_rss_mb()
    out = io.StringIO()
    profiler = cProfile.Profile() if profile else None
    try:
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        call_command("import_trajectories", str(path), project=slug, json=True, stdout=out)
        if profiler:
            profiler.disable()
        import_s = time.perf_counter() - started
        import_rss = peak_rss_mb()
        summary = json.loads(out.getvalue())

        ids = dict(Trajectory.objects.filter(project__slug=slug).values_list("external_id", "pk"))
        rows: list[tuple] = []
        with open(path, "rb") as lines:
            for line in lines:
                record = validate(json.loads(line))
                trajectory_id = ids[record.id]
                rows.extend((trajectory_id, *row) for row in encode(record).steps)

        # The baseline writes the very same rows into the very same table (indexes, foreign
        # key and WAL included): the importer's steps are deleted, then COPYed back raw.
        table = Step._meta.db_table
        columns = ", ".join(connection.ops.quote_name(c) for c in STEP_COLUMNS)
        Step.objects.filter(trajectory__project__slug=slug).delete()
        with connection.cursor() as cursor:
            cursor.execute(f"VACUUM ANALYZE {table}")
            started = time.perf_counter()
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            copy_s = time.perf_counter() - started
    finally:
        Project.objects.filter(slug=slug).delete()
    if profiler:
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(15)
    return {
        "trajectories": summary["created"],
        "steps": summary["steps"],
        "copy_steps": len(rows),
        "import_s": import_s,
        "copy_s": copy_s,
        "start_rss_mb": start_rss,
        "import_rss_mb": import_rss,
    }


def run_size(trajectories: int, steps: int, folder: Path, profile: bool, repeat: int) -> dict:
    """Measure one size `repeat` times, each in a fresh process; medians of the timings."""
    path = folder / f"demo-{trajectories}x{steps}.jsonl"
    write_file(path, trajectories, steps)
    command = [sys.executable, __file__, "--measure", str(path)]
    if profile:
        command.append("--profile")
    runs = []
    for _ in range(repeat):
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        if done.returncode:
            sys.exit(
                f"measuring {trajectories} trajectories failed (exit {done.returncode}, see above)"
            )
        runs.append(json.loads(done.stdout.splitlines()[-1]))
    result = dict(runs[0])
    for key in ("import_s", "copy_s"):
        result[key] = statistics.median(r[key] for r in runs)
    result["import_rss_mb"] = max(r["import_rss_mb"] for r in runs)
    result["file_mb"] = path.stat().st_size / 2**20
    path.unlink()
    return result


def print_table(results: list[dict], steps: int, repeat: int) -> None:
    head = (
        f"{'runs':>6} {'steps':>8} {'file MB':>8} {'import s':>9} {'runs/s':>8} {'steps/s':>9} "
        f"{'COPY s':>7} {'COPY steps/s':>13} {'ratio':>6} {'RSS start':>10} {'RSS peak':>9}"
    )
    print(
        f"Import vs raw COPY, {steps} steps per trajectory; medians of {repeat} runs "
        "(RSS in MB, peak over the import)"
    )
    print(head)
    for r in results:
        rate = r["steps"] / r["import_s"]
        copy_rate = r["copy_steps"] / r["copy_s"]
        print(
            f"{r['trajectories']:>6} {r['steps']:>8} {r['file_mb']:>8.1f} {r['import_s']:>9.2f} "
            f"{r['trajectories'] / r['import_s']:>8,.0f} {rate:>9,.0f} {r['copy_s']:>7.2f} "
            f"{copy_rate:>13,.0f} {rate / copy_rate:>6.2f} {r['start_rss_mb']:>10.0f} "
            f"{r['import_rss_mb']:>9.0f}"
        )
    worst = min(r["steps"] / r["import_s"] / (r["copy_steps"] / r["copy_s"]) for r in results)
    verdict = "meets" if worst >= TARGET_RATIO else "misses"
    print(f"Lowest ratio {worst:.2f} {verdict} the target of {TARGET_RATIO}.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, nargs="+", default=[2000, 8000])
    parser.add_argument("--steps-per-trajectory", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3, help="runs per size (medians shown)")
    parser.add_argument("--profile", action="store_true", help="cProfile the import (stderr)")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        sys.exit(
            "bench/ingest.py compares the importer with a raw PostgreSQL COPY, so it needs "
            "PostgreSQL: set DATABASE_URL=postgres://USER@HOST:PORT/DB (migrated)."
        )
    sys.path.insert(0, str(ROOT))
    from curation.demo import MIN_STEPS

    if args.steps_per_trajectory < MIN_STEPS:
        parser.error(f"--steps-per-trajectory must be at least {MIN_STEPS}")
    if args.measure:
        print(json.dumps(measure(args.measure, args.profile)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as folder:
        results = [
            run_size(n, args.steps_per_trajectory, Path(folder), args.profile, args.repeat)
            for n in args.trajectories
        ]
    print_table(results, args.steps_per_trajectory, args.repeat)


if __name__ == "__main__":
    main()
