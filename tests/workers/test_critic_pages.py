"""Critic pages: members see the versions and their held-out measures; researchers and admins
train and make the critic judge; annotators may not (403); outsiders see nothing (404)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from curation.models import Membership, Project
from tests.annotate.helpers import client_for, make_member
from tests.workers.critic_data import add_run
from workers.critic import jobs
from workers.models import CriticModel, JudgeConfig

TRAIN = {"source": "effective", "encoder": "hashing", "retrain_after": ""}


@pytest.fixture
def labelled(project: Project) -> Project:
    for i in range(8):
        add_run(project, i)
    return project


def trained(project: Project) -> CriticModel:
    return jobs.train(jobs.request(project, encoder="hashing", send=False).pk)


@pytest.mark.django_db
@pytest.mark.parametrize("role", [Membership.Role.RESEARCHER, Membership.Role.ADMIN])
def test_researchers_and_admins_train_follow_and_use_the_critic(
    labelled, role, django_capture_on_commit_callbacks
) -> None:
    client = client_for(make_member(labelled, "rita", role))
    with django_capture_on_commit_callbacks() as queued:
        response = client.post("/p/demo/critic/train/", TRAIN)
    assert response.status_code == 302 and response["Location"] == "/p/demo/critic/"
    assert len(queued) == 1  # the training task goes to a worker after the commit
    critic = CriticModel.objects.get(project=labelled)
    assert (critic.version, critic.status, critic.encoder) == (1, "queued", "hashing")

    page = client.get("/p/demo/critic/").content.decode()
    assert "Queued" in page and 'hx-trigger="every 2s"' in page
    jobs.train(critic.pk)
    partial = client.get("/p/demo/critic/", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and 'id="critic-versions"' in partial
    assert "Done" in partial and "hx-trigger" not in partial

    detail = client.get("/p/demo/critic/v1/").content.decode()
    assert "critical step, within three" in detail and "Use as the critic judge" in detail
    response = client.post("/p/demo/critic/v1/judge/")
    assert response.status_code == 302 and response["Location"] == "/p/demo/judges/critic/"
    config = JudgeConfig.objects.get(project=labelled, name="critic")
    assert config.model == CriticModel.objects.get(pk=critic.pk).artifact


@pytest.mark.django_db
def test_annotators_see_the_critic_but_may_not_train_or_use_it(labelled) -> None:
    trained(labelled)
    client = client_for(make_member(labelled, "ann", Membership.Role.ANNOTATOR))
    page = client.get("/p/demo/critic/")
    assert page.status_code == 200 and "Train a new version" not in page.content.decode()
    detail = client.get("/p/demo/critic/v1/")
    assert detail.status_code == 200 and "Use as the critic judge" not in detail.content.decode()
    assert client.post("/p/demo/critic/train/", TRAIN).status_code == 403
    assert client.post("/p/demo/critic/v1/judge/").status_code == 403
    assert CriticModel.objects.count() == 1 and not JudgeConfig.objects.filter(name="critic")


@pytest.mark.django_db
def test_outsiders_see_nothing(labelled) -> None:
    trained(labelled)
    other = Project.objects.create(slug="other", name="Other")
    client = client_for(make_member(other, "olga", Membership.Role.ADMIN))
    for url in ("/p/demo/critic/", "/p/demo/critic/v1/"):
        assert client.get(url).status_code == 404
    assert client.post("/p/demo/critic/train/", TRAIN).status_code == 404
    assert client.post("/p/demo/critic/v1/judge/").status_code == 404
    anonymous = client_for(User.objects.create_user("nobody"))
    assert anonymous.get("/p/demo/critic/").status_code == 404


@pytest.mark.django_db
def test_training_without_labels_is_refused_with_the_reason(project) -> None:
    add_run(project, 0, gold=False)
    client = client_for(make_member(project, "rita", Membership.Role.RESEARCHER))
    response = client.post("/p/demo/critic/train/", TRAIN)
    assert response.status_code == 400
    assert "has 0 trajectory(ies) with a first critical step" in response.content.decode()
    assert not CriticModel.objects.exists()


@pytest.mark.django_db
def test_a_judge_of_that_name_with_another_backend_is_not_taken_over(labelled) -> None:
    trained(labelled)
    JudgeConfig.objects.create(project=labelled, name="critic", backend="heuristic")
    client = client_for(make_member(labelled, "rita", Membership.Role.RESEARCHER))
    response = client.post("/p/demo/critic/v1/judge/")
    assert response.status_code == 409 and "rename it" in response.content.decode()
    assert JudgeConfig.objects.get(project=labelled, name="critic").backend == "heuristic"
