"""Scheduled judging: each config with `schedule_minutes` has one django-celery-beat periodic
task that judges the matching trajectories its current version has not judged yet."""

from __future__ import annotations

import json

from django.db.models import QuerySet
from django.http import QueryDict
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from annotate.views.lists import filter_form, project_trajectories
from curation.models import Trajectory
from workers.judging import runs
from workers.models import JudgeBatch, JudgeConfig

SCHEDULED_TASK = "workers.judge_scheduled"


def periodic_task_name(config: JudgeConfig) -> str:
    return f"judge config {config.pk} ({config.project.slug}/{config.name})"


def sync(config: JudgeConfig) -> None:
    """Create, change or remove the config's periodic task to match its schedule."""
    if not config.schedule_minutes or not config.is_active:
        sync_removed(config)
        return
    every, _ = IntervalSchedule.objects.get_or_create(
        every=config.schedule_minutes, period=IntervalSchedule.MINUTES
    )
    PeriodicTask.objects.update_or_create(
        name=periodic_task_name(config),
        defaults={
            "task": SCHEDULED_TASK,
            "interval": every,
            "args": json.dumps([config.pk]),
            "queue": "default",
            "enabled": True,
        },
    )


def sync_removed(config: JudgeConfig) -> None:
    PeriodicTask.objects.filter(task=SCHEDULED_TASK, args=json.dumps([config.pk])).delete()


def matching(config: JudgeConfig) -> QuerySet[Trajectory]:
    """The project's trajectories that pass the config's filter (the list page's filters)."""
    data = QueryDict(mutable=True)
    for key, value in (config.filter or {}).items():
        data[key] = str(value)
    form = filter_form(data, config.project)
    filters = form.filters()
    if form.errors:
        problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
        raise ValueError(f"judge config {config.name}: bad filter: {problems}")
    return project_trajectories(config.project, filters)


def judge_new(config: JudgeConfig) -> JudgeBatch | None:
    """One scheduled round: a batch of the matching trajectories not judged yet, if any."""
    if not config.is_active:
        return None
    todo = runs.unjudged(config, matching(config))
    if not todo.exists():
        return None
    return runs.start_batch(config, todo, reason="scheduled")
