"""python manage.py judge --config NAME [--project SLUG] [--wait | --here] [--json]"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from workers import schedule
from workers.judging import runs
from workers.lookup import find_config
from workers.models import JudgeBatch


class Command(BaseCommand):
    help = (
        "Judge the trajectories that match a judge config's filter and that its current "
        "version has not judged yet. Queues the work for Celery workers; --wait follows it "
        "to the end, --here does it in this process (no worker needed)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--config", required=True, help="the judge config's name")
        parser.add_argument("--project", help="the project's slug (when names repeat)")
        how = parser.add_mutually_exclusive_group()
        how.add_argument("--wait", action="store_true", help="wait for the workers to finish")
        how.add_argument("--here", action="store_true", help="judge in this process")
        parser.add_argument("--timeout", type=float, default=3600, help="seconds --wait waits")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        config = find_config(options["config"], options["project"])
        try:
            todo = runs.unjudged(config, schedule.matching(config))
        except ValueError as error:
            raise CommandError(str(error)) from None
        if not todo.exists():
            message = f"Nothing to judge: {config.name} has judged every matching trajectory."
            self.stdout.write(
                json.dumps({"batch": None, "total": 0}) if options["json"] else message
            )
            return
        batch = runs.start_batch(config, todo, reason="asked", send=not options["here"])
        if not options["json"]:
            self.stdout.write(
                f"Batch {batch.pk}: {batch.total} trajectories for {batch.version.label} "
                f"({config.get_backend_display()}, on the '{config.queue}' queue)."
            )
        if options["here"]:
            pending = list(
                batch.runs.order_by("trajectory_id").values_list("trajectory_id", flat=True)
            )
            size = settings.JUDGE_BATCH_SIZE
            for start in range(0, len(pending), size):
                runs.judge(batch.version_id, pending[start : start + size], batch.pk)
                self.show(batch, options["json"])
        elif options["wait"]:
            self.wait(batch, options["timeout"], options["json"])
        batch.refresh_from_db()
        counts = runs.progress(batch)
        if options["json"]:
            self.stdout.write(json.dumps({"batch": batch.pk, "status": batch.status, **counts}))
        else:
            self.stdout.write(
                f"\n{batch.status}: {counts['done']} judged, {counts['failed']} failed, "
                f"{counts['queued'] + counts['running']} still to do."
            )
        if counts["failed"]:
            self.stderr.write("Failed runs say why on the batch page.")

    def wait(self, batch: JudgeBatch, timeout: float, quiet: bool) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            batch.refresh_from_db()
            self.show(batch, quiet)
            if batch.status in (JudgeBatch.Status.DONE, JudgeBatch.Status.FAILED):
                return
            time.sleep(1)
        raise CommandError(
            f"batch {batch.pk} not finished after {timeout:.0f}s: is a worker consuming "
            f"the queue? (celery -A config worker -Q default,gpu)"
        )

    def show(self, batch: JudgeBatch, quiet: bool) -> None:
        if quiet or not sys.stderr.isatty():
            return
        counts = runs.progress(batch)
        finished = counts["done"] + counts["failed"]
        bar = "#" * int(30 * finished / max(batch.total, 1))
        sys.stderr.write(f"\r[{bar:<30}] {finished}/{batch.total}, {counts['failed']} failed")
        sys.stderr.flush()
