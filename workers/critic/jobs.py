"""The database side of the critic (Django; the `critic` backend never imports this module):
which trajectories it learns from, a training recorded as a `CriticModel` row, the critic
judge that follows the newest artifact, and retraining once enough new labels came in.

The critic learns only from people: gold labels, human annotations, adjudications, or by
default the effective label where its first critical step came from one of those. Judges'
steps (the critic's own suggestions among them) never train it.

numpy and the encoder are imported inside `train`, so Celery workers without the `local`
extra start and run everything else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max, OuterRef, Subquery
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from annotate.models import Annotation, EffectiveLabel
from curation.models import Project, Step, Trajectory
from workers import schedule
from workers.judging import runs
from workers.judging.compare import reference_labels
from workers.judging.evaluation import Label
from workers.models import CriticModel, JudgeConfig

TRAIN_TASK = "workers.train_critic"
RETRAIN_TASK = "workers.retrain_critics"
TRAIN_QUEUE = "gpu"  # model work: the encoder runs on a GPU where the worker has one
RETRAIN_CHECK_MINUTES = 10
JUDGE_NAME = "critic"
HUMAN_GRADE = (
    EffectiveLabel.Source.ADJUDICATED,
    EffectiveLabel.Source.HUMANS_AGREE,
    EffectiveLabel.Source.HUMAN,
)
PAYLOAD_CHUNK = 500
Source = CriticModel.Source
Status = CriticModel.Status


class NoLabels(ValueError):
    """Too few labelled trajectories to train on."""


def critic_dir(project: Project) -> Path:
    return Path(settings.MEDIA_ROOT) / "critics" / project.slug


def labels(project: Project, source: str) -> dict[int, Label]:
    """Labels with a first critical step, by trajectory id, from `source`."""
    if source != Source.EFFECTIVE:
        return {
            pk: label
            for pk, label in reference_labels(project, source).items()
            if label.critical_step is not None
        }
    step_name = Step.objects.filter(
        trajectory=OuterRef("trajectory"), index=OuterRef("first_critical_step")
    ).values("name")[:1]
    named = Annotation.objects.filter(
        trajectory=OuterRef("trajectory"),
        source__in=[Annotation.Source.GOLD, Annotation.Source.HUMAN],
        status=Annotation.Status.SUBMITTED,
        first_critical_step=OuterRef("first_critical_step"),
    ).exclude(responsible_agent="")
    rows = EffectiveLabel.objects.filter(
        trajectory__project=project,
        first_critical_step__isnull=False,
        first_critical_step_source__in=HUMAN_GRADE,
    ).annotate(
        step_name=Subquery(step_name),
        named_agent=Subquery(named.order_by("id").values("responsible_agent")[:1]),
    )
    return {
        row["trajectory_id"]: Label(
            "", row["first_critical_step"], "", row["named_agent"] or row["step_name"] or ""
        )
        for row in rows.values("trajectory_id", "first_critical_step", "step_name", "named_agent")
    }


def no_labels_message(project: Project, source: str, found: int) -> str:
    said = Source(source).label
    return (
        f"project '{project.slug}' has {found} trajectory(ies) with a first critical step from "
        f"{said}; the critic needs at least 2, from at least 2 tasks. Label failures (or "
        f"import a dataset with gold labels) first."
    )


def examples(project: Project, source: str) -> list[Any]:
    """The labelled trajectories as training examples (trajectory, task, step, agent)."""
    from workers.critic.training import Example

    labelled = labels(project, source)
    if len(labelled) < 2:
        raise NoLabels(no_labels_message(project, source, len(labelled)))
    ids = sorted(labelled)
    out = []
    for start in range(0, len(ids), PAYLOAD_CHUNK):
        chunk = ids[start : start + PAYLOAD_CHUNK]
        tasks = dict(Trajectory.objects.filter(pk__in=chunk).values_list("pk", "task_id"))
        payloads = runs.payloads(chunk)
        for pk in chunk:
            label = labelled[pk]
            out.append(Example(pk, str(tasks[pk]), payloads[pk], label.critical_step, label.agent))
    return out


def request(
    project: Project,
    source: str = Source.EFFECTIVE,
    encoder: str = "minilm",
    user: Any = None,
    retrain_after: int | None = None,
    send: bool = True,
) -> CriticModel:
    """Record a training of the project's next critic version and, with `send`, queue it.
    Raises NoLabels (nothing is recorded) when there is nothing to learn from."""
    found = len(labels(project, source))
    if found < 2:
        raise NoLabels(no_labels_message(project, source, found))
    with transaction.atomic():
        Project.objects.select_for_update().filter(pk=project.pk).exists()  # one at a time
        latest = project.critics.aggregate(top=Max("version"))["top"] or 0
        critic = CriticModel.objects.create(
            project=project,
            version=latest + 1,
            source=source,
            encoder=encoder,
            retrain_after=retrain_after,
            created_by=user,
        )
        if retrain_after:
            transaction.on_commit(sync_retrain_check)
        if send:
            transaction.on_commit(lambda: send_training(critic.pk))
    return critic


def send_training(critic_id: int) -> None:
    from celery import current_app

    current_app.send_task(TRAIN_TASK, args=[critic_id], queue=TRAIN_QUEUE)


def train(critic_id: int, judge_after: bool = True) -> CriticModel:
    """The training task's body: train, write the artifact, record what came of it, and move
    the project's critic judges onto it (queueing their judging with `judge_after`). A row
    already done is left as it is."""
    from workers.critic import artifact, training
    from workers.critic.encoder import EncoderError, make_encoder

    critic = CriticModel.objects.select_related("project").get(pk=critic_id)
    if critic.status == Status.DONE:
        return critic
    CriticModel.objects.filter(pk=critic.pk).update(status=Status.RUNNING)
    project = critic.project
    folder = critic_dir(project)
    try:
        found = examples(project, critic.source)
        encoder = make_encoder(critic.encoder, folder / f"embeddings-{critic.encoder}.sqlite3")
        result = training.train(found, encoder, training.Settings(encoder=critic.encoder))
    except (NoLabels, training.NotEnoughLabels, EncoderError) as error:
        return failed(critic, str(error))
    except Exception as error:  # recorded for the page, then raised for the worker's log
        failed(critic, f"{type(error).__name__}: {error}")
        raise
    path = folder / f"critic-v{critic.version}.npz"
    header = {
        "project": project.slug,
        "version": critic.version,
        "source": critic.source,
        "summary": result.summary,
        "metrics": result.metrics,
    }
    artifact.save(result.critic, path, json.loads(json.dumps(header)))
    critic.status, critic.error = Status.DONE, ""
    critic.artifact = str(path)
    critic.summary, critic.metrics = header["summary"], header["metrics"]
    critic.labelled = len(found)
    critic.finished_at = timezone.now()
    critic.save()
    follow(critic, judge_after)
    return critic


def failed(critic: CriticModel, error: str) -> CriticModel:
    critic.status, critic.error, critic.finished_at = Status.FAILED, error, timezone.now()
    critic.save(update_fields=["status", "error", "finished_at"])
    return critic


def follow(critic: CriticModel, judge_after: bool = True) -> list[JudgeConfig]:
    """Point the project's critic judges that use an earlier version at this one (a new
    judge version); with `judge_after`, queue what that version has not judged yet."""
    earlier = (
        CriticModel.objects.filter(project=critic.project)
        .exclude(pk=critic.pk)
        .values_list("artifact", flat=True)
    )
    configs = list(
        JudgeConfig.objects.select_related("project").filter(
            project=critic.project, backend=JudgeConfig.Backend.CRITIC, model__in=list(earlier)
        )
    )
    for config in configs:
        config.model = critic.artifact
        config.save(update_fields=["model"])
        runs.current_version(config)
        if judge_after and config.is_active:
            schedule.judge_new(config)
    return configs


def use_as_judge(critic: CriticModel, user: Any) -> JudgeConfig:
    """The project's `critic` judge, made or moved onto this version. Raises ValueError when
    a judge of that name with another backend is in the way."""
    config, created = JudgeConfig.objects.get_or_create(
        project=critic.project,
        name=JUDGE_NAME,
        defaults={
            "backend": JudgeConfig.Backend.CRITIC,
            "model": critic.artifact,
            "strategy": JudgeConfig.Strategy.ALL_AT_ONCE,
            "score_steps": True,
            "created_by": user,
        },
    )
    if config.backend != JudgeConfig.Backend.CRITIC:
        raise ValueError(
            f"this project's judge '{JUDGE_NAME}' uses the {config.backend} backend; rename it "
            "to make room for the critic judge"
        )
    if not created and config.model != critic.artifact:
        config.model = critic.artifact
        config.save(update_fields=["model"])
    runs.current_version(config)
    return config


def sync_retrain_check() -> None:
    """The periodic task that looks for critics due a retraining (one for all projects)."""
    every, _ = IntervalSchedule.objects.get_or_create(
        every=RETRAIN_CHECK_MINUTES, period=IntervalSchedule.MINUTES
    )
    PeriodicTask.objects.update_or_create(
        name="step critic retraining check",
        defaults={"task": RETRAIN_TASK, "interval": every, "queue": "default", "enabled": True},
    )


def retrain_due() -> list[CriticModel]:
    """Queue a new version of each project's newest critic that asks to be retrained after
    N new labels, when N more trajectories are labelled than it was trained on."""
    queued = []
    for project in Project.objects.filter(critics__retrain_after__isnull=False).distinct():
        newest = project.critics.order_by("-version").first()
        if newest is None or not newest.retrain_after or newest.status != Status.DONE:
            continue  # not asked for, or a training is already queued, running or failed
        if len(labels(project, newest.source)) - newest.labelled < newest.retrain_after:
            continue
        queued.append(
            request(
                project,
                newest.source,
                newest.encoder,
                retrain_after=newest.retrain_after,
            )
        )
    return queued
