"""python manage.py import_trajectories PATH [PATH...] --project SLUG [--format NAME] [--json]"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from curation.canonical import AGENT_ROLES
from curation.formats import FORMATS
from curation.formats.reading import RawItem, decompressed, expand_paths, iter_stream
from curation.ingest import ImportSummary, Overrides, import_items
from curation.models import Project
from curation.progress import ProgressLine


class Command(BaseCommand):
    help = (
        "Import agent runs from files or folders (JSON or JSON Lines, optionally .gz). "
        "The format is detected per record unless --format is given. "
        "Exits 1 when any record failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument("--project", required=True, help="project slug (created if missing)")
        parser.add_argument("--format", choices=sorted(FORMATS), help="skip detection")
        parser.add_argument("--agent-model", default="", help="set the agent model of every run")
        parser.add_argument("--agent-role", choices=AGENT_ROLES[:2], default="")
        parser.add_argument("--batch-size", type=int, default=None)
        parser.add_argument("--json", action="store_true", help="print one JSON summary")

    def handle(self, *args: Any, **options: Any) -> None:
        files, missing = expand_paths(options["paths"])
        if not files and not missing:
            raise CommandError("no .json, .jsonl or .ndjson files found in the given paths")
        project, project_created = Project.objects.get_or_create(
            slug=options["project"], defaults={"name": options["project"]}
        )
        progress = ProgressLine(sum(f.stat().st_size for f in files))
        position = {"done": 0}

        def items() -> Iterator[RawItem]:
            for path in files:
                with open(path, "rb") as raw:
                    for item in iter_stream(decompressed(path, raw), str(path)):
                        yield item
                        done = position["done"] + raw.tell()
                        progress.update(done, summary.created, summary.failed)
                position["done"] += path.stat().st_size

        summary = ImportSummary()
        for path in missing:
            summary.add_error(path, "no such file or folder")
        import_items(
            project,
            items(),
            format_name=options["format"],
            overrides=Overrides(options["agent_model"], options["agent_role"]),
            batch_size=options["batch_size"],
            summary=summary,
        )
        progress.update(progress.total, summary.created, summary.failed, force=True)
        progress.close()
        self._report(summary, project, project_created, options["json"])
        if summary.failed:
            sys.exit(1)

    def _report(
        self, summary: ImportSummary, project: Project, created: bool, as_json: bool
    ) -> None:
        if as_json:
            self.stdout.write(json.dumps({"project": project.slug, **summary.as_dict()}))
            return
        if created:
            self.stdout.write(f"Created project '{project.slug}'.")
        for error in summary.errors:
            where = ", ".join(part for part in (error["source"], error["location"]) if part)
            self.stderr.write(f"{where}: {error['error']}")
        style = self.style.ERROR if summary.failed else self.style.SUCCESS
        self.stdout.write(
            style(
                f"Imported {summary.created} trajectories ({summary.steps} steps, "
                f"{summary.tasks_created} new tasks, {summary.annotations} gold labels) into "
                f"'{project.slug}'; {summary.duplicates} already present, "
                f"{summary.failed} failed."
            )
        )
