"""python manage.py create_queue --project SLUG --name NAME [--filter KEY=VALUE ...]"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotate.models import Queue
from annotate.queues import create_queue
from annotate.views.lists import filters_from_pairs
from curation.models import Project


class Command(BaseCommand):
    help = (
        "Make an annotation queue from a trajectory list filter (the project page's GET "
        "parameters, e.g. --filter outcome=failure --filter model=gpt-4o). A queue of that "
        "name already in the project is left as it is."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--filter", action="append", default=[], metavar="KEY=VALUE")
        parser.add_argument("--overlap", type=int, default=1, help="annotators per item")
        parser.add_argument("--annotator", action="append", default=[], metavar="USERNAME")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project '{options['project']}'")
        existing = Queue.objects.filter(project=project, name=options["name"]).first()
        if existing:
            self.stdout.write(
                f"Queue '{existing.name}' already exists ({existing.items.count()} items)."
            )
            return
        try:
            filters = filters_from_pairs(project, options["filter"])
        except ValueError as error:
            raise CommandError(str(error)) from None
        users = list(get_user_model().objects.filter(username__in=options["annotator"]))
        unknown = set(options["annotator"]) - {u.get_username() for u in users}
        if unknown:
            raise CommandError(f"no such user: {', '.join(sorted(unknown))}")
        if options["overlap"] < 1:
            raise CommandError("--overlap must be at least 1")
        queue = create_queue(project, options["name"], filters, options["overlap"], users, None)
        self.stdout.write(
            self.style.SUCCESS(f"Made queue '{queue.name}' with {queue.items.count()} items.")
        )
