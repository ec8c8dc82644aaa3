"""train_critic: trains on a small labelled project, stores a versioned artifact with its
training summary and held-out measures, and says clearly when there is nothing to learn."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django_celery_beat.models import PeriodicTask

from curation.models import Membership
from tests.annotate.helpers import make_member
from tests.workers.critic_data import add_run
from workers.critic import artifact, jobs, training
from workers.critic.encoder import make_encoder
from workers.models import CriticModel, JudgeBatch, JudgeConfig


def train(*args: str) -> dict:
    out = io.StringIO()
    call_command(
        "train_critic", "--project", "demo", "--encoder", "hashing", "--json", *args, stdout=out
    )
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_training_stores_an_artifact_that_reloads_to_the_held_out_measures(project) -> None:
    for i in range(12):
        add_run(project, i)
    out = train()

    critic = CriticModel.objects.get(project=project)
    assert (out["version"], critic.version, critic.status) == (1, 1, CriticModel.Status.DONE)
    assert Path(critic.artifact).is_file() and out["artifact"] == critic.artifact
    assert critic.summary["trajectories"] == critic.labelled == 12
    assert critic.summary["held_out"]["tasks"] >= 1
    assert out["held_out"] == critic.metrics

    # The same held-out trajectories, scored by the reloaded artifact: the same measures.
    examples = jobs.examples(project, CriticModel.Source.EFFECTIVE)
    _, test_idx = training.split_by_task([e.task for e in examples], 0.2, 0)
    reloaded, header = artifact.load(critic.artifact)
    assert header["metrics"] == critic.metrics
    held_out = [examples[i] for i in test_idx]
    encoded = training.encode([e.trajectory for e in held_out], make_encoder("hashing"))
    predictions = dict(
        zip([e.key for e in held_out], training.predict(reloaded, encoded), strict=True)
    )
    assert training.measure(predictions, held_out) == critic.metrics


@pytest.mark.django_db
def test_a_project_without_labels_gets_a_clear_error(project) -> None:
    add_run(project, 0, gold=False)
    add_run(project, 1, gold=False)
    with pytest.raises(CommandError, match="has 0 trajectory\\(ies\\) with a first critical step"):
        train()
    assert not CriticModel.objects.exists()


@pytest.mark.django_db
def test_from_humans_learns_only_from_human_annotations(project) -> None:
    annotator = make_member(project, "ann", Membership.Role.ANNOTATOR)
    for i in range(4):
        add_run(project, i, gold=False, human=annotator)
    for i in range(4, 10):
        add_run(project, i)  # gold
    out = train("--from", "humans")
    assert out["summary"]["trajectories"] == 4
    assert train("--from", "gold")["summary"]["trajectories"] == 6
    assert train()["summary"]["trajectories"] == 10  # effective: gold counts as human


@pytest.mark.django_db
def test_the_critic_judge_follows_each_new_version(project) -> None:
    for i in range(8):
        add_run(project, i)
    first = train("--use-as-judge")
    config = JudgeConfig.objects.get(project=project, name=first["judge"])
    assert (config.backend, config.model) == ("critic", first["artifact"])
    assert config.current_version.number == 1

    add_run(project, 8)
    second = train()
    config.refresh_from_db()
    assert second["version"] == 2
    assert config.model == second["artifact"] != first["artifact"]
    assert config.current_version.number == 2 and second["judge"] == config.name
    assert not JudgeBatch.objects.exists()  # judged when asked: `judge --config critic --here`

    third = jobs.train(jobs.request(project, encoder="hashing", send=False).pk)  # a worker's
    config.refresh_from_db()
    assert (config.model, config.current_version.number) == (third.artifact, 3)
    batch = JudgeBatch.objects.get(version=config.current_version)
    assert (batch.reason, batch.total) == ("scheduled", 9)  # re-judged by the new version


@pytest.mark.django_db
def test_retraining_waits_for_enough_new_labels(
    project, django_capture_on_commit_callbacks
) -> None:
    for i in range(6):
        add_run(project, i)
    with django_capture_on_commit_callbacks(execute=True):
        train("--retrain-after", "3")
    check = PeriodicTask.objects.get(task=jobs.RETRAIN_TASK)
    assert check.enabled and check.interval.every == jobs.RETRAIN_CHECK_MINUTES
    assert jobs.retrain_due() == []
    for i in range(6, 8):
        add_run(project, i)
    assert jobs.retrain_due() == []  # two new labels, three asked for
    add_run(project, 8)
    (queued,) = jobs.retrain_due()
    assert (queued.version, queued.status, queued.retrain_after) == (2, "queued", 3)
    assert jobs.retrain_due() == []  # one training at a time
    assert jobs.train(queued.pk).labelled == 9
