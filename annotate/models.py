"""Judgements of trajectories (by people, by judges, or gold labels that came with a dataset),
per-step scores, annotation queues, adjudications and the effective label they add up to."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from curation.models import Project, Trajectory


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
    extra = models.JSONField(default=dict, blank=True, help_text="The project's extra labels.")
    step_labels = models.JSONField(
        default=dict, blank=True, help_text='Per-step labels by step index: {"3": "progress"}.'
    )
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


class StepScore(models.Model):
    """A label and/or score for one step, from a person, a judge or a reward model."""

    class Label(models.TextChoices):
        PROGRESS = "progress"
        EXPLORATION = "exploration"
        NO_PROGRESS = "no_progress"
        REGRESSION = "regression"
        ERROR = "error"

    class Source(models.TextChoices):
        HUMAN = "human"
        JUDGE = "judge"
        REWARD_MODEL = "reward_model"

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="step_scores")
    step_index = models.PositiveIntegerField()
    source = models.CharField(max_length=20, choices=Source.choices)
    source_name = models.CharField(max_length=200, blank=True)
    label = models.CharField(max_length=20, choices=Label.choices, blank=True)
    score = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["trajectory", "step_index", "id"]
        indexes = [models.Index(fields=["trajectory", "step_index"], name="stepscore_traj_step")]

    def __str__(self) -> str:
        return f"step {self.step_index} of {self.trajectory_id}: {self.label or self.score}"


class Queue(models.Model):
    """Trajectories picked by a list filter, handed to annotators `overlap` times each, in the
    queue's `order` (annotate/queues.py)."""

    class Order(models.TextChoices):
        POSITION = "position", "list order"
        UNCERTAINTY = "uncertainty", "critic least sure first"
        DISAGREEMENT = "disagreement", "critic and judges disagree most first"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="queues")
    name = models.CharField(max_length=200)
    filter = models.JSONField(
        default=dict, blank=True, help_text="The list filter it was made from."
    )
    overlap = models.PositiveSmallIntegerField(default=1, help_text="Annotators per item.")
    order = models.CharField(
        max_length=20,
        choices=Order.choices,
        default=Order.POSITION,
        help_text="Which open item comes next: list order, or what teaches the critic most.",
    )
    annotators = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="annotation_queues",
        help_text="Who may work on it; nobody listed means every annotator of the project.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["project", "-id"]

    def __str__(self) -> str:
        return self.name


class QueueItem(models.Model):
    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="items")
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()
    claims = models.PositiveSmallIntegerField(
        default=0, help_text="Assignments handed out; never more than the queue's overlap."
    )

    class Meta:
        ordering = ["queue", "position"]
        constraints = [
            models.UniqueConstraint(fields=["queue", "trajectory"], name="queueitem_unique")
        ]
        indexes = [models.Index(fields=["queue", "claims", "position"], name="queueitem_open")]

    def __str__(self) -> str:
        return f"{self.queue_id}#{self.position}"


class Assignment(models.Model):
    class Status(models.TextChoices):
        CLAIMED = "claimed"
        DONE = "done"

    item = models.ForeignKey(QueueItem, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments"
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.CLAIMED)
    claimed_at = models.DateTimeField(auto_now_add=True)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["item", "annotator"], name="assignment_unique")
        ]

    def __str__(self) -> str:
        return f"{self.item} for {self.annotator_id} ({self.status})"


class Adjudication(models.Model):
    """A reviewer's final label where annotators disagree; it outranks every other source."""

    trajectory = models.OneToOneField(
        Trajectory, on_delete=models.CASCADE, related_name="adjudication"
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    verdict = models.CharField(max_length=20, choices=Annotation.Verdict.choices, blank=True)
    first_critical_step = models.PositiveIntegerField(null=True, blank=True)
    root_cause_step = models.PositiveIntegerField(null=True, blank=True)
    error_category = models.CharField(max_length=100, blank=True)
    rationale = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"adjudication of {self.trajectory_id}: {self.verdict}"


class EffectiveLabel(models.Model):
    """The label a trajectory ends up with (DESIGN.md section 3), field by field with the source
    each field came from. Derived: `annotate.effective.refresh` rewrites it whenever an
    annotation, an adjudication or an import changes its inputs, so lists can filter on it."""

    class Source(models.TextChoices):
        ADJUDICATED = "adjudicated"
        HUMANS_AGREE = "humans_agree", "agreeing humans"
        HUMAN = "human"
        OUTCOME = "outcome", "verified outcome"
        JUDGE_PANEL = "judge_panel", "judge panel"
        JUDGE = "judge"
        HEURISTIC = "heuristic"

    trajectory = models.OneToOneField(
        Trajectory, on_delete=models.CASCADE, primary_key=True, related_name="effective_label"
    )
    verdict = models.CharField(max_length=20, blank=True)
    verdict_source = models.CharField(max_length=20, choices=Source.choices, blank=True)
    first_critical_step = models.PositiveIntegerField(null=True, blank=True)
    first_critical_step_source = models.CharField(max_length=20, choices=Source.choices, blank=True)
    root_cause_step = models.PositiveIntegerField(null=True, blank=True)
    root_cause_step_source = models.CharField(max_length=20, choices=Source.choices, blank=True)
    error_category = models.CharField(max_length=100, blank=True)
    error_category_source = models.CharField(max_length=20, choices=Source.choices, blank=True)
    has_human = models.BooleanField(default=False, help_text="A person or gold label judged it.")
    humans_disagree = models.BooleanField(default=False)
    judge_disagrees = models.BooleanField(
        default=False, help_text="A judge's verdict or critical step differs from the humans'."
    )

    class Meta:
        indexes = [
            models.Index(fields=["verdict", "verdict_source"], name="effective_verdict"),
            models.Index(fields=["error_category"], name="effective_category"),
        ]

    def __str__(self) -> str:
        return f"{self.trajectory_id}: {self.verdict or '?'} ({self.verdict_source or 'none'})"


class AnnotationChange(models.Model):
    """One save of an annotation or an adjudication by a person: who, when, and each changed
    field as [old, new] (annotate/history.py). Consecutive draft autosaves by one person are
    folded into one row. It outlives the label it describes (the link is then empty)."""

    class Action(models.TextChoices):
        CREATED = "created"
        UPDATED = "updated"
        SUBMITTED = "submitted"

    trajectory = models.ForeignKey(
        Trajectory, on_delete=models.CASCADE, related_name="label_changes"
    )
    annotation = models.ForeignKey(
        Annotation, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes"
    )
    adjudication = models.ForeignKey(
        Adjudication, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField(help_text="The (last folded-in) save.")
    action = models.CharField(max_length=20, choices=Action.choices)
    changes = models.JSONField(default=dict, blank=True, help_text='{"field": [old, new]}')

    class Meta:
        ordering = ["trajectory", "-at", "-id"]
        indexes = [models.Index(fields=["trajectory", "at"], name="labelchange_traj_at")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(annotation__isnull=True) | models.Q(adjudication__isnull=True),
                name="labelchange_one_subject",
            )
        ]

    def __str__(self) -> str:
        subject = "adjudication" if self.adjudication_id else f"annotation {self.annotation_id}"
        return f"{subject} of {self.trajectory_id} {self.action} at {self.at:%Y-%m-%d %H:%M}"
