"""python manage.py correction_report --project SLUG [--json]"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from curation.models import Project
from workers.corrections import report


class Command(BaseCommand):
    help = (
        "Recovery rate of the project's corrections (accepted / attempted), overall and by "
        "teacher, mode, environment, error category and original model."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project '{options['project']}'")
        tables = report.recovery(project)
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(tables), indent=2))
            return
        for name, rows in tables.items():
            self.stdout.write(f"\n{name}")
            self.stdout.write(
                f"  {'':30} {'attempted':>9} {'accepted':>8} {'rejected':>8} "
                f"{'unverified':>10} {'failed':>6} {'recovery':>8}"
            )
            for row in rows:
                rate = "n/a" if row.rate is None else f"{row.rate:.1%}"
                self.stdout.write(
                    f"  {row.value[:30]:30} {row.attempted:9} {row.accepted:8} {row.rejected:8} "
                    f"{row.unverified:10} {row.failed:6} {rate:>8}"
                )
