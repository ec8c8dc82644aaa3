"""python manage.py seed_demo [--project demo] [--count 60]"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from curation.demo import PROJECT_NAME, demo_records
from curation.formats.reading import RawItem
from curation.ingest import import_items
from curation.models import Project


class Command(BaseCommand):
    help = (
        "Create a demo project of synthetic airline support runs (teacher and student, "
        "successes, failures with gold labels). Running it again adds nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", default="demo", help="project slug (default: demo)")
        parser.add_argument("--count", type=int, default=60, help="trajectories (default: 60)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["count"] < 0:
            raise CommandError("--count cannot be negative")
        project, created = Project.objects.get_or_create(
            slug=options["project"],
            defaults={"name": PROJECT_NAME},
        )
        self.stdout.write(
            f"Created project '{project.slug}'."
            if created
            else f"Project '{project.slug}' already exists."
        )
        items = (
            RawItem(source="seed_demo", location=f"item {i}", obj=record)
            for i, record in enumerate(demo_records(options["count"]))
        )
        summary = import_items(project, items)
        if summary.failed:
            errors = "; ".join(f"{e['location']}: {e['error']}" for e in summary.errors)
            raise CommandError(f"{summary.failed} demo records failed: {errors}")
        self.stdout.write(
            self.style.SUCCESS(
                f"Seeded {summary.created} trajectories ({summary.steps} steps, "
                f"{summary.tasks_created} new tasks, {summary.annotations} gold labels) into "
                f"'{project.slug}'; {summary.duplicates} already present."
            )
        )
