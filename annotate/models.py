"""Judgements of trajectories: by people, by judges, or gold labels that came with a dataset."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from curation.models import Trajectory


class Annotation(models.Model):
    class Source(models.TextChoices):
        GOLD = "gold", "gold (dataset label)"
        HUMAN = "human"
        JUDGE = "judge"
        HEURISTIC = "heuristic"

    class Verdict(models.TextChoices):
        SUCCESS = "success"
        PARTIAL = "partial"
        FAILURE = "failure"

    class Status(models.TextChoices):
        DRAFT = "draft"
        SUBMITTED = "submitted"

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="annotations")
    source = models.CharField(max_length=20, choices=Source.choices)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="annotations",
    )
    source_name = models.CharField(
        max_length=200,
        blank=True,
        help_text="Named author when there is no user: the gold dataset or the judge config.",
    )
    verdict = models.CharField(max_length=20, choices=Verdict.choices, blank=True)
    first_critical_step = models.PositiveIntegerField(null=True, blank=True)
    root_cause_step = models.PositiveIntegerField(null=True, blank=True)
    responsible_agent = models.CharField(max_length=255, blank=True)
    error_category = models.CharField(max_length=100, blank=True)
    rationale = models.TextField(blank=True)
    confidence = models.FloatField(null=True, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.SUBMITTED)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["trajectory", "id"]
        indexes = [models.Index(fields=["trajectory", "source"], name="annotation_traj_source")]
        constraints = [
            models.UniqueConstraint(
                fields=["trajectory", "author"],
                condition=models.Q(author__isnull=False),
                name="annotation_one_per_user",
            ),
            models.UniqueConstraint(
                fields=["trajectory", "source", "source_name"],
                condition=models.Q(author__isnull=True),
                name="annotation_one_per_named_source",
            ),
        ]

    def __str__(self) -> str:
        who = self.author or self.source_name or self.source
        return f"{who} on {self.trajectory_id}: {self.verdict or 'no verdict'}"
