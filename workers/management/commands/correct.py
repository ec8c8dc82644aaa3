"""python manage.py correct --project SLUG --teacher NAME [--mode step|rollout] ..."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotate.views.lists import project_trajectories
from curation.models import Project
from workers.corrections import runner
from workers.lookup import list_filters
from workers.models import CorrectionBatch, JudgeConfig, TeacherConfig


class Command(BaseCommand):
    help = (
        "Have a teacher correct failed trajectories from their first critical step (the "
        "effective label's); trajectories without one are skipped with the reason. Queues the "
        "work for Celery workers; --wait follows it, --here runs it in this process."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--teacher", required=True, help="a teacher config's name")
        parser.add_argument("--mode", choices=["step", "rollout"], default="step")
        parser.add_argument(
            "--environment",
            default="replay",
            help="rollout only: replay, simulated, python:dotted.path.Class or http(s)://URL",
        )
        parser.add_argument("--guidance", action="store_true", help="a reflector writes advice")
        parser.add_argument(
            "--reflector", help="teacher config writing guidance (default: the teacher)"
        )
        parser.add_argument("--simulator", help="teacher config playing tools and user (simulated)")
        parser.add_argument("--verifier", help="judge config (or panel member) that verifies")
        parser.add_argument("--max-steps", type=int, default=20, help="rollout: assistant turns")
        parser.add_argument("--filter", action="append", default=[], metavar="KEY=VALUE")
        how = parser.add_mutually_exclusive_group()
        how.add_argument("--wait", action="store_true")
        how.add_argument("--here", action="store_true")
        parser.add_argument("--timeout", type=float, default=3600)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project '{options['project']}'")
        teacher = self.teacher(project, options["teacher"])
        reflector = self.teacher(project, options["reflector"]) if options["reflector"] else None
        simulator = self.teacher(project, options["simulator"]) if options["simulator"] else None
        verifier = None
        if options["verifier"]:
            verifier = JudgeConfig.objects.filter(project=project, name=options["verifier"]).first()
            if verifier is None:
                raise CommandError(f"no judge config '{options['verifier']}' in '{project.slug}'")
        if options["max_steps"] < 1:
            raise CommandError("--max-steps must be at least 1")
        trajectories = project_trajectories(project, list_filters(project, options["filter"]))
        try:
            batch = runner.start_batch(
                teacher,
                trajectories,
                mode=options["mode"],
                environment=options["environment"],
                guidance=options["guidance"],
                max_steps=options["max_steps"],
                verifier=verifier,
                reflector=reflector,
                simulator=simulator,
                send=not options["here"],
            )
        except ValueError as error:
            raise CommandError(str(error)) from None
        if not options["json"]:
            self.stdout.write(
                f"Batch {batch.pk}: {batch.total} corrections by {teacher.name} "
                f"(mode {batch.mode}, {batch.environment}); {len(batch.skipped)} skipped "
                "(no first critical step)."
            )
        if options["here"]:
            ids = list(batch.corrections.order_by("id").values_list("id", flat=True))
            size = settings.JUDGE_BATCH_SIZE
            for start in range(0, len(ids), size):
                runner.correct(ids[start : start + size])
        elif options["wait"]:
            self.wait(batch, options["timeout"])
        batch.refresh_from_db()
        counts = runner.progress(batch)
        if options["json"]:
            self.stdout.write(json.dumps({"batch": batch.pk, "status": batch.status, **counts}))
        else:
            self.stdout.write(
                f"{batch.status}: {counts['accepted']} accepted, {counts['rejected']} rejected, "
                f"{counts['generated']} not verified, {counts['failed']} failed, "
                f"{counts['queued'] + counts['running']} still to do."
            )

    def teacher(self, project: Project, name: str) -> TeacherConfig:
        teacher = TeacherConfig.objects.filter(project=project, name=name).first()
        if teacher is None:
            known = ", ".join(project.teachers.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"no teacher config '{name}' in '{project.slug}' (known: {known})")
        return teacher

    def wait(self, batch: CorrectionBatch, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            batch.refresh_from_db()
            if sys.stderr.isatty():
                counts = runner.progress(batch)
                left = counts["queued"] + counts["running"]
                sys.stderr.write(f"\r{batch.total - left}/{batch.total} done")
            if batch.status == CorrectionBatch.Status.DONE:
                return
            time.sleep(1)
        raise CommandError(f"batch {batch.pk} not finished after {timeout:.0f}s: is a worker up?")
