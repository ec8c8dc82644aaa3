"""Review and adjudication: reviewers see disagreements side by side and record the final label."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotate.effective import refresh
from annotate.models import Adjudication, Annotation, EffectiveLabel
from curation.models import Membership, Project, Step, Task, Trajectory


def trajectory_in(project: Project, number: int = 1, steps: int = 6) -> Trajectory:
    task, _ = Task.objects.get_or_create(project=project, external_id="task-1")
    trajectory = Trajectory.objects.create(
        project=project,
        task=task,
        external_id=f"run-{number}",
        source_format="test",
        content_hash=f"hash-{number}",
        step_count=steps,
    )
    Step.objects.bulk_create(
        Step(trajectory=trajectory, index=i, role="assistant", content=f"step {i}")
        for i in range(steps)
    )
    return trajectory


def label(trajectory: Trajectory, username: str, **fields) -> Annotation:
    author, _ = User.objects.get_or_create(username=username)
    annotation = Annotation.objects.create(
        trajectory=trajectory, source=Annotation.Source.HUMAN, author=author, **fields
    )
    refresh([trajectory.pk])
    return annotation


def disagreement(project: Project, number: int = 1) -> Trajectory:
    trajectory = trajectory_in(project, number)
    label(trajectory, "ann1", verdict="failure", first_critical_step=2, error_category="wrong_tool")
    label(trajectory, "ann2", verdict="failure", first_critical_step=4, error_category="other")
    return trajectory


def member(project: Project, role: str, username: str | None = None) -> User:
    user = User.objects.create_user(username or role)
    Membership.objects.create(project=project, user=user, role=role)
    return user


@pytest.fixture
def reviewer(client: Client, project: Project) -> Client:
    client.force_login(member(project, Membership.Role.REVIEWER))
    return client


def final_label(**fields) -> dict:
    data = {
        "verdict": "failure",
        "first_critical_step": "3",
        "root_cause_step": "1",
        "error_category": "wrong_plan",
        "rationale": "Step 3 books the wrong flight.",
        "based_on": "",
    }
    data.update(fields)
    return data


# --- permissions ----------------------------------------------------------------------------


def urls(project: Project, trajectory: Trajectory) -> list[str]:
    return [f"/p/{project.slug}/review/", f"/p/{project.slug}/review/{trajectory.pk}/"]


def test_it_redirects_anonymous_users_to_login(client: Client, project: Project) -> None:
    for url in urls(project, disagreement(project)):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"] == f"/accounts/login/?next={url}"


def test_it_gives_404_to_users_without_membership(client: Client, project: Project) -> None:
    other = Project.objects.create(slug="other", name="Other")
    client.force_login(member(other, Membership.Role.ADMIN))
    for url in urls(project, disagreement(project)):
        assert client.get(url).status_code == 404
        assert client.post(url, final_label()).status_code == 404


@pytest.mark.parametrize("role", [Membership.Role.ANNOTATOR, Membership.Role.RESEARCHER])
def test_it_gives_403_to_members_who_do_not_review(
    client: Client, project: Project, role: str
) -> None:
    trajectory = disagreement(project)
    client.force_login(member(project, role))
    for url in urls(project, trajectory):
        assert client.get(url).status_code == 403
    response = client.post(urls(project, trajectory)[1], final_label())
    assert response.status_code == 403
    assert not Adjudication.objects.exists()


@pytest.mark.parametrize("role", [Membership.Role.REVIEWER, Membership.Role.ADMIN])
def test_it_lets_reviewers_and_admins_in(client: Client, project: Project, role: str) -> None:
    trajectory = disagreement(project)
    client.force_login(member(project, role))
    for url in urls(project, trajectory):
        assert client.get(url).status_code == 200


def test_it_gives_404_for_a_trajectory_of_another_project(
    reviewer: Client, project: Project
) -> None:
    other = Project.objects.create(slug="other", name="Other")
    trajectory = disagreement(other)
    assert reviewer.get(f"/p/{project.slug}/review/{trajectory.pk}/").status_code == 404


# --- the list -------------------------------------------------------------------------------


def test_it_lists_only_trajectories_whose_humans_disagree(
    reviewer: Client, project: Project
) -> None:
    disputed = disagreement(project, 1)
    agreed = trajectory_in(project, 2)
    label(agreed, "ann1", verdict="success")
    label(agreed, "ann2", verdict="success")
    response = reviewer.get("/p/demo/review/")
    assert list(response.context["trajectories"]) == [disputed]
    assert "wrong_tool" in response.content.decode()


def test_it_moves_adjudicated_trajectories_out_of_the_open_list(
    reviewer: Client, project: Project
) -> None:
    trajectory = disagreement(project)
    Adjudication.objects.create(trajectory=trajectory, verdict="failure", first_critical_step=2)
    assert list(reviewer.get("/p/demo/review/").context["trajectories"]) == []
    done = reviewer.get("/p/demo/review/?show=adjudicated").context["trajectories"]
    assert list(done) == [trajectory]


def test_it_pages_the_list_by_keyset(reviewer: Client, project: Project, monkeypatch) -> None:
    monkeypatch.setattr("annotate.paging.PAGE_SIZE", 2)
    trajectories = [disagreement(project, n) for n in range(1, 4)]
    first = reviewer.get("/p/demo/review/")
    assert list(first.context["trajectories"]) == trajectories[:2]
    assert first.context["next_after"] == trajectories[1].pk
    second = reviewer.get(f"/p/demo/review/?after={trajectories[1].pk}")
    assert list(second.context["trajectories"]) == trajectories[2:]
    assert second.context["next_after"] is None


def queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as context:
        assert client.get(url).status_code == 200
    return len(context.captured_queries)


def test_the_list_runs_a_fixed_number_of_queries(reviewer: Client, project: Project) -> None:
    disagreement(project, 1)
    few = queries(reviewer, "/p/demo/review/")
    for number in range(2, 7):
        trajectory = disagreement(project, number)
        label(trajectory, f"extra{number}", verdict="success")
    Adjudication.objects.create(trajectory=trajectory, verdict="success")
    assert queries(reviewer, "/p/demo/review/?show=all") == few


# --- the detail page ------------------------------------------------------------------------


def test_it_shows_the_labels_side_by_side_escaped(reviewer: Client, project: Project) -> None:
    trajectory = disagreement(project)
    label(trajectory, "ann3", verdict="success", rationale="<script>alert(1)</script>")
    html = reviewer.get(f"/p/demo/review/{trajectory.pk}/").content.decode()
    for text in ("ann1", "ann2", "ann3", "wrong_tool", "other", f"/t/{trajectory.pk}/"):
        assert text in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)" not in html


def test_the_detail_page_runs_a_fixed_number_of_queries(reviewer: Client, project: Project) -> None:
    trajectory = disagreement(project)
    url = f"/p/demo/review/{trajectory.pk}/"
    few = queries(reviewer, url)
    for number in range(3, 8):
        label(trajectory, f"ann{number}", verdict="partial", first_critical_step=number % 6)
    Adjudication.objects.create(trajectory=trajectory, verdict="failure", first_critical_step=1)
    assert queries(reviewer, url) == few


def test_adjudication_sets_the_effective_label(reviewer: Client, project: Project) -> None:
    trajectory = disagreement(project)
    assert EffectiveLabel.objects.get(trajectory=trajectory).first_critical_step_source != (
        "adjudicated"
    )
    response = reviewer.post(f"/p/demo/review/{trajectory.pk}/", final_label())
    assert response.status_code == 302
    adjudication = Adjudication.objects.get(trajectory=trajectory)
    assert adjudication.reviewer.username == "reviewer"
    effective = EffectiveLabel.objects.get(trajectory=trajectory)
    assert (effective.verdict, effective.verdict_source) == ("failure", "adjudicated")
    assert (effective.first_critical_step, effective.root_cause_step) == (3, 1)
    assert (effective.error_category, effective.error_category_source) == (
        "wrong_plan",
        "adjudicated",
    )


def test_a_second_save_updates_the_one_adjudication(reviewer: Client, project: Project) -> None:
    trajectory = disagreement(project)
    url = f"/p/demo/review/{trajectory.pk}/"
    reviewer.post(url, final_label())
    based_on = reviewer.get(url).context["form"]["based_on"].value()
    response = reviewer.post(url, final_label(verdict="partial", based_on=based_on))
    assert response.status_code == 302
    assert Adjudication.objects.get().verdict == "partial"
    assert EffectiveLabel.objects.get(trajectory=trajectory).verdict == "partial"


def test_a_stale_save_is_refused(reviewer: Client, project: Project) -> None:
    trajectory = disagreement(project)
    url = f"/p/demo/review/{trajectory.pk}/"
    stale = reviewer.get(url).context["form"]["based_on"].value()
    reviewer.post(url, final_label(based_on=stale))
    response = reviewer.post(url, final_label(verdict="success", based_on=stale))
    assert response.status_code == 200
    assert "Another reviewer saved" in response.content.decode()
    assert Adjudication.objects.get().verdict == "failure"


def test_the_root_cause_defaults_to_the_critical_step(reviewer: Client, project: Project) -> None:
    trajectory = disagreement(project)
    reviewer.post(f"/p/demo/review/{trajectory.pk}/", final_label(root_cause_step=""))
    assert Adjudication.objects.get().root_cause_step == 3


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"first_critical_step": ""}, "first_critical_step", "A failure needs a first critical"),
        ({"first_critical_step": "6"}, "first_critical_step", "steps 0 to 5"),
        ({"root_cause_step": "9"}, "root_cause_step", "steps 0 to 5"),
        ({"root_cause_step": "4"}, "root_cause_step", "cannot come after the critical step"),
        (
            {"verdict": "success", "first_critical_step": ""},
            "root_cause_step",
            "A root cause needs a first critical step",
        ),
        ({"error_category": "made_up"}, "error_category", "Select a valid choice"),
        ({"verdict": ""}, "verdict", "This field is required"),
    ],
)
def test_it_rejects_an_invalid_final_label(
    reviewer: Client, project: Project, fields: dict, field: str, message: str
) -> None:
    trajectory = disagreement(project)
    response = reviewer.post(f"/p/demo/review/{trajectory.pk}/", final_label(**fields))
    assert response.status_code == 200
    assert any(message in error for error in response.context["form"].errors[field])
    assert not Adjudication.objects.exists()


def test_a_success_needs_no_critical_step(reviewer: Client, project: Project) -> None:
    trajectory = disagreement(project)
    fields = {"verdict": "success", "first_critical_step": "", "root_cause_step": ""}
    response = reviewer.post(f"/p/demo/review/{trajectory.pk}/", final_label(**fields))
    assert response.status_code == 302
    assert EffectiveLabel.objects.get(trajectory=trajectory).verdict == "success"
