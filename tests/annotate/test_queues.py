"""Queues: making them from a list filter, completing items, progress, and the queue pages."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from annotate.models import Assignment, EffectiveLabel, Queue
from annotate.queues import claim_next, complete, create_queue, progress
from curation.models import Membership, Project, Step, Task, Trajectory
from tests.annotate.helpers import client_for, make_member


def make_trajectories(project: Project, count: int, **fields: object) -> list[Trajectory]:
    """`count` trajectories of one task, in id order; `fields` set model fields on all of them."""
    task, _ = Task.objects.get_or_create(project=project, external_id="task")
    start = project.trajectories.count()
    return [
        Trajectory.objects.create(
            project=project,
            task=task,
            source_format="canonical",
            content_hash=f"hash-{start + n}",
            **fields,
        )
        for n in range(count)
    ]


@pytest.fixture
def researcher(project) -> User:
    return make_member(project, "rita", Membership.Role.RESEARCHER)


@pytest.fixture
def annotators(project) -> list[User]:
    return [make_member(project, name) for name in ("ann", "bob", "cyd")]


# --- create_queue ---------------------------------------------------------------------------


def test_it_makes_a_queue_of_what_the_filter_matches_in_id_order(project, researcher):
    failures = make_trajectories(project, 3, success=False, agent_model="qwen")
    make_trajectories(project, 2, success=True, agent_model="qwen")
    make_trajectories(project, 2, success=False, agent_model="gpt-4o")

    queue = create_queue(
        project, "qwen failures", {"outcome": "failure", "model": "qwen"}, 2, [], researcher
    )

    items = list(queue.items.order_by("position"))
    assert [item.trajectory_id for item in items] == [t.pk for t in failures]
    assert [item.position for item in items] == [0, 1, 2]
    assert all(item.claims == 0 for item in items)
    assert queue.filter == {"outcome": "failure", "model": "qwen"}
    assert (queue.overlap, queue.created_by, queue.project) == (2, researcher, project)


def test_it_ignores_the_page_cursor_so_a_queue_covers_every_page(project, researcher):
    trajectories = make_trajectories(project, 4)
    queue = create_queue(project, "all", {"after": trajectories[1].pk}, 1, [], researcher)
    assert queue.items.count() == 4
    assert queue.filter == {}


def test_it_keeps_other_projects_out_and_numbers_positions_in_id_order(project, researcher):
    other = Project.objects.create(slug="other", name="Other")
    ours = []
    for _ in range(3):  # ids of the two projects interleave
        ours += make_trajectories(project, 1)
        make_trajectories(other, 1)
    queue = create_queue(project, "all", {}, 1, [], researcher)
    assert list(queue.items.values_list("trajectory_id", "position")) == [
        (t.pk, n) for n, t in enumerate(ours)
    ]


def test_it_takes_label_and_text_filters(project, researcher):
    wanted, other_verdict, other_text = make_trajectories(project, 3)
    for trajectory, verdict, text in (
        (wanted, "failure", "refund 100% now"),
        (other_verdict, "success", "refund 100% now"),
        (other_text, "failure", "refund 10 now"),
    ):
        EffectiveLabel.objects.create(trajectory=trajectory, verdict=verdict)
        Step.objects.create(trajectory=trajectory, index=0, role="assistant", content=text)
    filters = {"verdict": "failure", "q": "100%"}
    queue = create_queue(project, "q", filters, 1, [], researcher)
    assert [item.trajectory_id for item in queue.items.all()] == [wanted.pk]


def test_it_records_the_listed_annotators(project, researcher, annotators):
    make_trajectories(project, 1)
    queue = create_queue(project, "q", {}, 1, annotators[:2], researcher)
    assert set(queue.annotators.all()) == set(annotators[:2])


# --- complete and progress ------------------------------------------------------------------


def test_complete_marks_the_assignment_done_and_is_idempotent(project, annotators):
    (trajectory,) = make_trajectories(project, 1)
    queue = create_queue(project, "q", {}, 1, [], None)
    claim_next(queue, annotators[0])

    complete(queue, annotators[0], trajectory)
    assignment = Assignment.objects.get()
    assert assignment.status == Assignment.Status.DONE and assignment.done_at is not None
    done_at = assignment.done_at

    complete(queue, annotators[0], trajectory)
    complete(queue, annotators[1], trajectory)  # never claimed it: nothing happens
    assignment.refresh_from_db()
    assert (assignment.status, assignment.done_at) == (Assignment.Status.DONE, done_at)
    assert Assignment.objects.count() == 1


def test_progress_counts_per_annotator_and_items_done_at_the_overlap(project, annotators):
    ann, bob, cyd = annotators
    make_trajectories(project, 3)
    queue = create_queue(project, "q", {}, 2, [ann, bob, cyd], None)
    for user in (ann, bob):  # both take item 0 and finish it
        complete(queue, user, claim_next(queue, user))
    complete(queue, ann, claim_next(queue, ann))  # item 1: one of two done
    claim_next(queue, bob)  # item 1: bob's second, still open

    report = progress(queue)
    assert (report.items, report.items_done, report.percent) == (3, 1, 33)
    per_user = {row.annotator: (row.claimed, row.done) for row in report.annotators}
    assert per_user == {ann: (0, 2), bob: (1, 1), cyd: (0, 0)}


def test_progress_of_an_empty_queue(project):
    report = progress(Queue.objects.create(project=project, name="empty"))
    assert (report.items, report.items_done, report.percent, report.annotators) == (0, 0, 100, [])


# --- pages ----------------------------------------------------------------------------------


def test_a_researcher_makes_a_queue_from_the_list_filter(project, researcher, annotators):
    failures = make_trajectories(project, 2, success=False)
    make_trajectories(project, 2, success=True)
    client = client_for(researcher)

    form = client.get("/p/demo/queues/new/?outcome=failure&after=1")
    assert form.status_code == 200
    assert form.context["matching"] == 2
    assert "outcome: failure" in form.content.decode()

    data = {"name": "Failures", "overlap": 2, "annotators": [annotators[0].pk, annotators[1].pk]}
    response = client.post("/p/demo/queues/new/?outcome=failure&after=1", data)
    queue = Queue.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/q/{queue.pk}/"
    assert queue.filter == {"outcome": "failure"}
    assert [i.trajectory_id for i in queue.items.all()] == [t.pk for t in failures]
    assert set(queue.annotators.all()) == set(annotators[:2])


def test_the_form_takes_every_list_filter(project, researcher):
    make_trajectories(project, 1)
    url = "/p/demo/queues/new/?category=wrong_tool&verdict=failure&annotated=no"
    response = client_for(researcher).get(url)
    assert not response.context["filter_form"].errors
    assert response.context["filters"] == {
        "category": "wrong_tool",
        "verdict": "failure",
        "annotated": "no",
    }


def test_the_form_refuses_an_overlap_larger_than_the_annotators(project, researcher, annotators):
    make_trajectories(project, 1)
    data = {"name": "q", "overlap": 3, "annotators": [annotators[0].pk, annotators[1].pk]}
    response = client_for(researcher).post("/p/demo/queues/new/", data)
    assert response.status_code == 200
    assert "needs at least 3 annotators; there are 2" in response.content.decode()
    assert not Queue.objects.exists()


def test_the_form_refuses_a_filter_that_matches_nothing_or_is_invalid(project, researcher):
    make_trajectories(project, 1, success=False)
    client = client_for(researcher)
    empty = client.post("/p/demo/queues/new/?outcome=success", {"name": "q", "overlap": 1})
    assert "No trajectories match this filter." in empty.content.decode()
    bad = client.post("/p/demo/queues/new/?outcome=bogus", {"name": "q", "overlap": 1})
    assert "Fix the filter" in bad.content.decode()
    assert not Queue.objects.exists()


def test_the_form_offers_only_the_projects_members(project, researcher, annotators):
    Project.objects.create(slug="other", name="Other")
    make_member(Project.objects.get(slug="other"), "outsider")
    form = client_for(researcher).get("/p/demo/queues/new/").context["form"]
    choices = form.fields["annotators"].queryset
    assert {u.username for u in choices} == {"rita", "ann", "bob", "cyd"}
    assert form.fields["annotators"].label_from_instance(choices.get(username="ann")) == (
        "ann (annotator)"
    )


def test_only_researchers_and_admins_make_queues(project, annotators):
    make_trajectories(project, 1)
    reviewer = make_member(project, "rev", Membership.Role.REVIEWER)
    admin = make_member(project, "adm", Membership.Role.ADMIN)
    for user in (annotators[0], reviewer):
        client = client_for(user)
        assert client.get("/p/demo/queues/new/").status_code == 403
        assert client.post("/p/demo/queues/new/", {"name": "q", "overlap": 1}).status_code == 403
    assert client_for(admin).get("/p/demo/queues/new/").status_code == 200
    assert not Queue.objects.exists()


def test_the_list_and_detail_pages_show_progress(project, researcher, annotators):
    make_trajectories(project, 2)
    queue = create_queue(project, "Batch one", {}, 1, [], researcher)
    complete(queue, annotators[0], claim_next(queue, annotators[0]))
    client = client_for(annotators[1])

    listing = client.get("/p/demo/queues/")
    assert listing.status_code == 200
    html = listing.content.decode()
    assert "Batch one" in html and "1 / 2" in html and f"/q/{queue.pk}/next/" in html
    assert "/p/demo/queues/new/" not in html  # annotators cannot make queues

    detail = client.get(f"/q/{queue.pk}/")
    assert detail.status_code == 200
    assert "1 of 2 items (50%)" in detail.content.decode()
    assert [(r.annotator, r.done) for r in detail.context["progress"].annotators] == [
        (annotators[0], 1)
    ]


def test_next_opens_the_claimed_trajectory_then_says_the_queue_is_finished(project, annotators):
    (trajectory,) = make_trajectories(project, 1)
    queue = create_queue(project, "q", {}, 1, [], None)
    client = client_for(annotators[0])

    response = client.get(f"/q/{queue.pk}/next/")
    assert response.status_code == 302
    assert response["Location"] == f"/t/{trajectory.pk}/?queue={queue.pk}"
    assert client.get(f"/q/{queue.pk}/next/")["Location"] == response["Location"]  # reload

    complete(queue, annotators[0], trajectory)
    finished = client.get(f"/q/{queue.pk}/next/")
    assert finished.status_code == 200
    assert "Queue finished" in finished.content.decode()


def test_a_closed_queue_hands_out_nothing(project, annotators):
    make_trajectories(project, 1)
    queue = create_queue(project, "q", {}, 1, [], None)
    Queue.objects.filter(pk=queue.pk).update(is_active=False)
    response = client_for(annotators[0]).get(f"/q/{queue.pk}/next/")
    assert "is closed" in response.content.decode()
    assert not Assignment.objects.exists()


def test_only_listed_annotators_may_claim(project, annotators):
    make_trajectories(project, 1)
    queue = create_queue(project, "q", {}, 1, [annotators[0]], None)
    client = client_for(annotators[1])
    assert client.get(f"/q/{queue.pk}/").status_code == 200  # members may look
    assert client.get(f"/q/{queue.pk}/next/").status_code == 403
    assert not Assignment.objects.exists()
    assert client_for(annotators[0]).get(f"/q/{queue.pk}/next/").status_code == 302


def test_members_of_other_projects_get_404_on_every_queue_page(project):
    make_trajectories(project, 1)
    queue = create_queue(project, "q", {}, 1, [], None)
    other = Project.objects.create(slug="other", name="Other")
    for role in (Membership.Role.ANNOTATOR, Membership.Role.ADMIN):
        client = client_for(make_member(other, f"outsider-{role}", role))
        for url in (
            "/p/demo/queues/",
            "/p/demo/queues/new/",
            f"/q/{queue.pk}/",
            f"/q/{queue.pk}/next/",
        ):
            assert client.get(url).status_code == 404, url
        assert client.post("/p/demo/queues/new/", {"name": "q", "overlap": 1}).status_code == 404
    assert not Assignment.objects.exists()
    assert Queue.objects.count() == 1


def test_queue_pages_need_a_login(client, project):
    queue = Queue.objects.create(project=project, name="q")
    for url in (
        "/p/demo/queues/",
        "/p/demo/queues/new/",
        f"/q/{queue.pk}/",
        f"/q/{queue.pk}/next/",
    ):
        assert client.get(url)["Location"] == f"/accounts/login/?next={url}"
