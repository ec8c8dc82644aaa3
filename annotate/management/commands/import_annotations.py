"""python manage.py import_annotations --project SLUG FILE

Reads what `export_annotations` wrote into a project that holds the same trajectories (import
them first with `import_trajectories`). Each line's trajectory is matched by content hash, else
by external id when exactly one trajectory of the project has it. Labels already present are
left alone, so importing a file twice creates nothing new; a label that exists here with other
values is kept as it is here and reported. People are matched by username; a username unknown
here becomes a new, inactive user without a password or project role, so the label keeps its
author and an admin can decide later. Everything that was not imported is reported with its
line number, and the command then exits 1.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from annotate.effective import refresh
from annotate.history import ADJUDICATION_FIELDS
from annotate.management.commands.export_annotations import (
    ANNOTATION_KEYS,
    FORMAT,
    FORMAT_VERSION,
    STEP_SCORE_KEYS,
    open_text,
)
from annotate.models import Adjudication, Annotation, StepScore
from curation.models import Project, Trajectory

COMPARED = tuple(key for key in ANNOTATION_KEYS if key != "version")


class LineError(ValueError):
    """What is wrong with one line; nothing of that line is stored."""


@dataclass
class Report:
    created: Counter = field(default_factory=Counter)
    present: Counter = field(default_factory=Counter)
    matched_by_external_id: int = 0
    new_users: list[str] = field(default_factory=list)
    problems: list[tuple[int, str]] = field(default_factory=list)  # (line, what)


def when(value: Any) -> datetime:
    if not isinstance(value, str):
        raise LineError(f"expected an ISO timestamp, got {value!r}")
    return datetime.fromisoformat(value)


def key_of(author: str | None, source: str, source_name: str) -> tuple[str, ...]:
    """What identifies an annotation within its trajectory: its author, else its source and
    name (the model's two unique constraints)."""
    return ("author", author) if author else (source, source_name)


def describe(key: tuple[str, ...]) -> str:
    if key[0] == "author":
        return f"the annotation of {key[1]}"
    return f"the {key[0]} annotation {key[1]!r}"


def same(here: Any, there: Any, keys: tuple[str, ...]) -> bool:
    return all(getattr(here, key) == getattr(there, key) for key in keys)


def checked(instance: Annotation | Adjudication | StepScore) -> None:
    """Refuse values the model does not take (choices, lengths, types)."""
    try:
        # Relations are left out: checking them would cost a query each, and we set them.
        instance.full_clean(
            exclude=["trajectory", "author", "reviewer"],
            validate_unique=False,
            validate_constraints=False,
        )
    except ValidationError as error:
        fields = "; ".join(f"{k}: {' '.join(v)}" for k, v in error.message_dict.items())
        raise LineError(fields) from None


class Importer:
    def __init__(self, project: Project, report: Report) -> None:
        self.project = project
        self.report = report
        rows = Trajectory.objects.filter(project=project).values_list(
            "pk", "content_hash", "external_id"
        )
        self.by_hash: dict[str, int] = {}
        self.by_external_id: dict[str, list[int]] = defaultdict(list)
        for pk, content_hash, external_id in rows:
            self.by_hash[content_hash] = pk
            if external_id:
                self.by_external_id[external_id].append(pk)
        self.users: dict[str, AbstractBaseUser] = {}
        self.touched: set[int] = set()

    def user(self, name: Any) -> AbstractBaseUser | None:
        """The user of that username; a missing one is created inactive, without a password."""
        if name is None:
            return None
        if not isinstance(name, str) or not name:
            raise LineError(f"bad username {name!r}")
        if name not in self.users:
            model = get_user_model()
            user = model.objects.filter(**{model.USERNAME_FIELD: name}).first()
            if user is None:
                user = model.objects.create_user(name, is_active=False)
                self.report.new_users.append(name)
            self.users[name] = user
        return self.users[name]

    def forget_users(self, count: int) -> None:
        """Forget the users created after the first `count`: their line was rolled back."""
        for name in self.report.new_users[count:]:
            del self.users[name]
        del self.report.new_users[count:]

    def trajectory(self, ref: Any) -> tuple[int, bool]:
        """The matching trajectory's id, and whether only its external id matched."""
        if not isinstance(ref, dict):
            raise LineError("no trajectory")
        content_hash, external_id = ref.get("content_hash"), ref.get("external_id")
        if content_hash in self.by_hash:
            return self.by_hash[content_hash], False
        candidates = self.by_external_id.get(external_id or "", [])
        if len(candidates) == 1:
            return candidates[0], True
        which = "several trajectories have" if candidates else "none has"
        raise LineError(
            f"no trajectory of '{self.project.slug}' has content hash {content_hash!r} and "
            f"{which} external id {external_id!r}"
        )

    def line(self, entry: Any) -> list[str]:
        """Store one trajectory's labels; the differences from labels already here."""
        if not isinstance(entry, dict):
            raise LineError("expected a JSON object")
        trajectory_id, by_external_id = self.trajectory(entry.get("trajectory"))
        differences = [
            *self._annotations(trajectory_id, entry.get("annotations") or []),
            *self._adjudication(trajectory_id, entry.get("adjudication")),
        ]
        self._step_scores(trajectory_id, entry.get("step_scores") or [])
        self.touched.add(trajectory_id)
        self.report.matched_by_external_id += by_external_id
        return differences

    def _annotations(self, trajectory_id: int, entries: list[Any]) -> list[str]:
        here = {
            key_of(a.author.get_username() if a.author else None, a.source, a.source_name): a
            for a in Annotation.objects.filter(trajectory_id=trajectory_id).select_related("author")
        }
        differences = []
        for data in entries:
            annotation = Annotation(
                trajectory_id=trajectory_id,
                author=self.user(data.get("author")),
                **{key: data[key] for key in ANNOTATION_KEYS},
            )
            checked(annotation)
            key = key_of(data.get("author"), annotation.source, annotation.source_name)
            existing = here.get(key)
            if existing is None:
                annotation.save()
                Annotation.objects.filter(pk=annotation.pk).update(
                    created_at=when(data["created_at"]), updated_at=when(data["updated_at"])
                )
                here[key] = annotation
                self.report.created["annotations"] += 1
            elif same(existing, annotation, COMPARED):
                self.report.present["annotations"] += 1
            else:
                differences.append(f"{describe(key)} differs from the one here")
        return differences

    def _adjudication(self, trajectory_id: int, data: Any) -> list[str]:
        if data is None:
            return []
        adjudication = Adjudication(
            trajectory_id=trajectory_id,
            reviewer=self.user(data.get("reviewer")),
            **{key: data[key] for key in ADJUDICATION_FIELDS},
        )
        checked(adjudication)
        existing = Adjudication.objects.filter(trajectory_id=trajectory_id).first()
        if existing is None:
            adjudication.save()
            Adjudication.objects.filter(pk=adjudication.pk).update(
                created_at=when(data["created_at"]), updated_at=when(data["updated_at"])
            )
            self.report.created["adjudications"] += 1
        elif same(existing, adjudication, ADJUDICATION_FIELDS):
            self.report.present["adjudications"] += 1
        else:
            return ["the adjudication differs from the one here"]
        return []

    def _step_scores(self, trajectory_id: int, entries: list[Any]) -> None:
        """Step scores have no identity of their own: a score counts as present while this
        trajectory has as many equal ones as the file."""
        here = Counter(
            StepScore.objects.filter(trajectory_id=trajectory_id).values_list(*STEP_SCORE_KEYS)
        )
        new: list[tuple[StepScore, datetime]] = []
        for data in entries:
            score = StepScore(
                trajectory_id=trajectory_id, **{key: data[key] for key in STEP_SCORE_KEYS}
            )
            checked(score)
            values = tuple(getattr(score, key) for key in STEP_SCORE_KEYS)
            if here[values]:
                here[values] -= 1
                self.report.present["step_scores"] += 1
            else:
                new.append((score, when(data["created_at"])))
        created = StepScore.objects.bulk_create([score for score, _ in new])
        for score, (_, created_at) in zip(created, new, strict=True):
            score.created_at = created_at
        StepScore.objects.bulk_update(created, ["created_at"])
        self.report.created["step_scores"] += len(created)


class Command(BaseCommand):
    help = (
        "Read labels written by export_annotations into a project holding the same "
        "trajectories. Labels already present are skipped; what could not be imported is "
        "reported by line, and the command then exits 1."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, metavar="FILE")
        parser.add_argument("--project", required=True, help="project slug")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project '{options['project']}'")
        path = Path(options["path"])
        if not path.is_file():
            raise CommandError(f"no such file: {path}")
        report = Report()
        with open_text(path, "r") as file, transaction.atomic():
            self._check_header(file.readline())
            importer = Importer(project, report)
            for number, text in enumerate(file, start=2):
                if text.strip():
                    self._import_line(importer, number, text)
            refresh(importer.touched)
        self._report(report, project)
        if report.problems:
            sys.exit(1)

    @staticmethod
    def _check_header(text: str) -> None:
        try:
            header = json.loads(text)
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise CommandError("line 1: not a label export of this app (no header)")
        if header.get("version") != FORMAT_VERSION:
            raise CommandError(
                f"line 1: export format version {header.get('version')!r} is unknown"
            )

    @staticmethod
    def _import_line(importer: Importer, number: int, text: str) -> None:
        """One line in its own savepoint: a bad line leaves nothing behind."""
        problem = ""
        users_before = len(importer.report.new_users)
        try:
            with transaction.atomic():
                differences = importer.line(json.loads(text))
        except json.JSONDecodeError as error:
            problem = f"not JSON ({error.msg})"
        except LineError as error:
            problem = str(error)
        except KeyError as error:
            problem = f"a label lacks {error}"
        except (TypeError, ValueError) as error:
            problem = f"malformed: {error}"
        else:
            importer.report.problems.extend(
                (number, f"{d}; kept this instance's") for d in differences
            )
            return
        importer.report.problems.append((number, problem))
        importer.forget_users(users_before)

    def _report(self, report: Report, project: Project) -> None:
        for number, problem in report.problems:
            self.stderr.write(f"line {number}: {problem}")
        if report.new_users:
            self.stdout.write(
                f"Created {len(report.new_users)} inactive users without a password or project "
                f"role: {', '.join(report.new_users)}."
            )
        if report.matched_by_external_id:
            self.stdout.write(
                f"{report.matched_by_external_id} trajectories matched by external id only "
                "(their content differs from the export's)."
            )
        style = self.style.ERROR if report.problems else self.style.SUCCESS
        kinds = ("annotations", "adjudications", "step_scores")
        created = ", ".join(f"{report.created[k]} {k.replace('_', ' ')}" for k in kinds)
        present = sum(report.present.values())
        self.stdout.write(
            style(
                f"Imported {created} into '{project.slug}'; {present} labels already present, "
                f"{len(report.problems)} problems."
            )
        )
