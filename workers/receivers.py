"""Every project starts with the heuristic judge, scheduled, so labels appear without anyone
configuring a model; saving a config keeps its periodic task in step."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from curation.models import Project
from workers import schedule
from workers.models import JudgeConfig

DEFAULT_JUDGE = "heuristic"
DEFAULT_SCHEDULE_MINUTES = 2


@receiver(post_save, sender=Project, dispatch_uid="workers_default_judge")
def add_default_judge(sender: type, instance: Project, created: bool, **kwargs: Any) -> None:
    if created and not kwargs.get("raw"):
        JudgeConfig.objects.create(
            project=instance,
            name=DEFAULT_JUDGE,
            backend=JudgeConfig.Backend.HEURISTIC,
            model="heuristic",
            schedule_minutes=DEFAULT_SCHEDULE_MINUTES,
        )


@receiver(post_save, sender=JudgeConfig, dispatch_uid="workers_sync_schedule")
def sync_schedule(sender: type, instance: JudgeConfig, **kwargs: Any) -> None:
    if not kwargs.get("raw"):
        schedule.sync(instance)


@receiver(post_delete, sender=JudgeConfig, dispatch_uid="workers_drop_schedule")
def drop_schedule(sender: type, instance: JudgeConfig, **kwargs: Any) -> None:
    schedule.sync_removed(instance)
