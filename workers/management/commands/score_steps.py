"""python manage.py score_steps --project SLUG --model PATH [--name NAME] [--filter K=V] [--here]"""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotate.views.lists import project_trajectories
from curation.models import Project
from workers import scoring
from workers.lookup import list_filters


class Command(BaseCommand):
    help = (
        "Score every assistant step of the matching trajectories with a reward model (a local "
        "transformers checkpoint with a classification head). Queues tasks for the GPU "
        "workers; --here scores in this process."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--model", required=True, help="local path of the checkpoint")
        parser.add_argument("--name", default="", help="score name (default rm:<folder>)")
        parser.add_argument("--device", default="auto")
        parser.add_argument("--filter", action="append", default=[], metavar="KEY=VALUE")
        parser.add_argument("--here", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project '{options['project']}'")
        filters = list_filters(project, options["filter"])
        ids = list(project_trajectories(project, filters).values_list("id", flat=True))
        size = settings.JUDGE_BATCH_SIZE
        chunks = [ids[i : i + size] for i in range(0, len(ids), size)]
        if options["here"]:
            scored = sum(
                scoring.score_trajectories(
                    options["model"], chunk, options["name"], options["device"]
                )
                for chunk in chunks
            )
            self.stdout.write(f"Scored {scored} assistant steps of {len(ids)} trajectories.")
            return
        for chunk in chunks:
            current_app.send_task(
                scoring.SCORE_TASK,
                args=[options["model"], chunk, options["name"], options["device"]],
                queue="gpu",
            )
        self.stdout.write(
            f"Queued {len(chunks)} tasks on the gpu queue for {len(ids)} trajectories."
        )
