"""python manage.py export_annotations --project SLUG --out FILE.jsonl[.gz]

Every label of a project as JSON Lines, for backups and for moving labels to another instance
(`import_annotations` reads it back). Line 1 is a header; then one line per trajectory that has
any label: the trajectory as (external_id, content_hash), its annotations of every source and
status (people by username), its adjudication and its step scores.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Prefetch
from django.utils import timezone

from annotate.history import ADJUDICATION_FIELDS, ANNOTATION_FIELDS
from annotate.models import Adjudication, Annotation, StepScore
from curation.models import Project, Trajectory

FORMAT = "trajectory-curation-labels"
FORMAT_VERSION = 1
ANNOTATION_KEYS = ("source", "source_name", *ANNOTATION_FIELDS, "version")
STEP_SCORE_KEYS = ("step_index", "source", "source_name", "label", "score")
CHUNK = 500


def open_text(path: Path, mode: str) -> IO[str]:
    """A text file, gzipped when its name ends in .gz."""
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def stamp(value: datetime) -> str:
    return value.isoformat()


def username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


def annotation_entry(annotation: Annotation) -> dict[str, Any]:
    entry = {key: getattr(annotation, key) for key in ANNOTATION_KEYS}
    entry["author"] = username(annotation.author)
    entry["created_at"] = stamp(annotation.created_at)
    entry["updated_at"] = stamp(annotation.updated_at)
    return entry


def adjudication_entry(adjudication: Adjudication) -> dict[str, Any]:
    entry = {key: getattr(adjudication, key) for key in ADJUDICATION_FIELDS}
    entry["reviewer"] = username(adjudication.reviewer)
    entry["created_at"] = stamp(adjudication.created_at)
    entry["updated_at"] = stamp(adjudication.updated_at)
    return entry


def step_score_entry(score: StepScore) -> dict[str, Any]:
    return {
        **{key: getattr(score, key) for key in STEP_SCORE_KEYS},
        "created_at": stamp(score.created_at),
    }


def trajectory_entry(trajectory: Trajectory) -> dict[str, Any] | None:
    """The trajectory's line, or None when it has no label at all."""
    adjudication = getattr(trajectory, "adjudication", None)
    annotations = list(trajectory.annotations.all())
    scores = list(trajectory.step_scores.all())
    if not (annotations or scores or adjudication):
        return None
    return {
        "trajectory": {
            "external_id": trajectory.external_id,
            "content_hash": trajectory.content_hash,
        },
        "annotations": [annotation_entry(a) for a in annotations],
        "adjudication": adjudication_entry(adjudication) if adjudication else None,
        "step_scores": [step_score_entry(s) for s in scores],
    }


class Command(BaseCommand):
    help = (
        "Write every label of a project (annotations of every source and status, "
        "adjudications, step scores) to a JSON Lines file, gzipped if it ends in .gz."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--out", required=True, type=Path, help="FILE.jsonl or FILE.jsonl.gz")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project '{options['project']}'")
        out = Path(options["out"])
        # Written aside and moved into place, so a failed export never looks like a whole one.
        partial = out.with_name(out.name + ".partial" + (".gz" if out.suffix == ".gz" else ""))
        counts = {"trajectories": 0, "annotations": 0, "adjudications": 0, "step_scores": 0}
        try:
            with open_text(partial, "w") as file:
                file.write(json.dumps(self._header(project)) + "\n")
                for entry in self._entries(project):
                    file.write(json.dumps(entry, ensure_ascii=False) + "\n")
                    counts["trajectories"] += 1
                    counts["annotations"] += len(entry["annotations"])
                    counts["adjudications"] += entry["adjudication"] is not None
                    counts["step_scores"] += len(entry["step_scores"])
            os.replace(partial, out)
        finally:
            partial.unlink(missing_ok=True)
        self.stdout.write(
            self.style.SUCCESS(
                f"Exported {counts['annotations']} annotations, {counts['adjudications']} "
                f"adjudications and {counts['step_scores']} step scores of "
                f"{counts['trajectories']} trajectories of '{project.slug}' to {out}."
            )
        )

    def _header(self, project: Project) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "project": project.slug,
            "exported_at": stamp(timezone.now()),
        }

    def _entries(self, project: Project) -> Iterator[dict[str, Any]]:
        trajectories = (
            Trajectory.objects.filter(project=project)
            .order_by("pk")
            .only("pk", "external_id", "content_hash")
            .prefetch_related(
                Prefetch("annotations", Annotation.objects.select_related("author").order_by("pk")),
                Prefetch("step_scores", StepScore.objects.order_by("pk")),
                Prefetch(
                    "adjudication", Adjudication.objects.select_related("reviewer").order_by("pk")
                ),
            )
        )
        for trajectory in trajectories.iterator(chunk_size=CHUNK):
            entry = trajectory_entry(trajectory)
            if entry is not None:
                yield entry
