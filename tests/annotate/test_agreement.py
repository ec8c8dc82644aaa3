"""Agreement metrics against hand-computed values, and the agreement page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from annotate.agreement import (
    Judgement,
    Rate,
    agreement,
    bars,
    category_counts,
    cohen_kappa,
    position_bin,
    position_counts,
)
from annotate.effective import refresh
from annotate.models import Annotation, Queue, QueueItem
from curation.models import Membership, Project, Task, Trajectory

# --- Cohen's kappa --------------------------------------------------------------------------


def test_kappa_is_one_for_perfect_agreement() -> None:
    result = cohen_kappa([("success", "success"), ("failure", "failure")] * 2)
    assert (result.observed, result.expected, result.kappa) == (1.0, 0.5, 1.0)


def test_kappa_is_zero_at_chance_level() -> None:
    pairs = [("success", "success"), ("success", "failure"), ("failure", "success")]
    result = cohen_kappa([*pairs, ("failure", "failure")])
    assert (result.observed, result.expected, result.kappa) == (0.5, 0.5, 0.0)


def test_kappa_is_minus_one_for_systematic_disagreement() -> None:
    result = cohen_kappa([("success", "failure"), ("failure", "success")])
    assert result.kappa == -1.0


def test_kappa_is_undefined_when_both_use_a_single_category() -> None:
    result = cohen_kappa([("failure", "failure")] * 3)
    assert (result.observed, result.expected, result.kappa) == (1.0, 1.0, None)
    assert result.counts == [[3]]


def test_kappa_is_zero_when_only_one_annotator_uses_a_single_category() -> None:
    # first: f f; second: f s. po = 1/2, pe = (2*1 + 0*1) / 4 = 1/2.
    result = cohen_kappa([("failure", "failure"), ("failure", "success")])
    assert result.kappa == 0.0


def test_kappa_matches_a_hand_computed_table() -> None:
    # 50 items: s/s 20, s/f 5, f/s 10, f/f 15. po = 35/50 = 0.7;
    # pe = (25 * 30 + 25 * 20) / 2500 = 0.5; kappa = 0.2 / 0.5 = 0.4.
    pairs = (
        [("success", "success")] * 20
        + [("success", "failure")] * 5
        + [("failure", "success")] * 10
        + [("failure", "failure")] * 15
    )
    result = cohen_kappa(pairs)
    assert result.labels == ["failure", "success"]
    assert result.counts == [[15, 10], [5, 20]]
    assert result.rows == [("failure", [15, 10]), ("success", [5, 20])]
    assert result.n == 50
    assert result.observed == pytest.approx(0.7)
    assert result.expected == pytest.approx(0.5)
    assert result.kappa == pytest.approx(0.4)


def test_kappa_of_three_categories() -> None:
    # counts (rows first, columns second; failure, partial, success):
    # [[2, 1, 0], [0, 1, 1], [0, 0, 3]]: po = 6/8; first's marginals 3, 2, 3; second's 2, 2, 4;
    # pe = (3*2 + 2*2 + 3*4) / 64 = 22/64; kappa = (48/64 - 22/64) / (42/64) = 26/42.
    pairs = (
        [("failure", "failure")] * 2
        + [("failure", "partial"), ("partial", "partial"), ("partial", "success")]
        + [("success", "success")] * 3
    )
    result = cohen_kappa(pairs)
    assert result.counts == [[2, 1, 0], [0, 1, 1], [0, 0, 3]]
    assert result.kappa == pytest.approx(26 / 42)


def test_kappa_of_no_items_is_undefined() -> None:
    result = cohen_kappa([])
    assert (result.n, result.observed, result.kappa) == (0, None, None)


# --- pairwise agreement ---------------------------------------------------------------------


def judgements() -> list[Judgement]:
    return [
        Judgement(1, "alice", "failure", 3, "wrong_tool"),
        Judgement(1, "bob", "failure", 4, "wrong_tool"),
        Judgement(1, "gold", "failure", 3, "wrong_arguments"),
        Judgement(2, "alice", "success"),
        Judgement(2, "bob", "failure", 2, "other"),
        Judgement(3, "alice", "failure", 5, "other"),  # alone: left out
    ]


def test_agreement_matches_hand_computed_numbers() -> None:
    report = agreement(judgements())
    assert (report.items, report.annotators) == (2, 3)
    pairs = {(p.first, p.second): p for p in report.pairs}
    assert list(pairs) == [("alice", "bob"), ("alice", "gold"), ("bob", "gold")]
    # alice x bob: (f, f), (s, f): po = 1/2, pe = (1*2 + 1*0) / 4 = 1/2, kappa 0.
    alice_bob = pairs["alice", "bob"]
    assert (alice_bob.items, alice_bob.verdict.n, alice_bob.verdict.kappa) == (2, 2, 0.0)
    assert alice_bob.verdict.counts == [[1, 0], [1, 0]]
    # Both gold pairs saw one failure only: kappa undefined, left out of the mean.
    assert pairs["alice", "gold"].verdict.kappa is None
    assert (report.mean_kappa, report.kappa_pairs) == (0.0, 1)
    # Item 1: steps 3/4, 3/3, 4/3; item 2 has no step from alice.
    assert report.critical_step_exact == Rate(agree=1, n=3, items=1)
    assert report.critical_step_within_one == Rate(agree=3, n=3, items=1)
    # Item 1: wrong_tool twice and wrong_arguments once: 1 of 3 pairs agree.
    assert report.category == Rate(agree=1, n=3, items=1)
    assert report.category.fraction == pytest.approx(1 / 3)


def test_mean_kappa_is_the_unweighted_mean_over_pairs() -> None:
    rows = []
    for item, (a, b, c) in enumerate(
        [("s", "s", "s"), ("f", "f", "s"), ("s", "s", "f"), ("f", "f", "f")]
    ):
        rows += [Judgement(item, "a", a), Judgement(item, "b", b), Judgement(item, "c", c)]
    report = agreement(rows)
    kappas = [p.verdict.kappa for p in report.pairs]
    # a x b agree throughout (1.0); a x c and b x c: po = 1/2, pe = 1/2 (0.0).
    assert kappas == [1.0, 0.0, 0.0]
    assert report.mean_kappa == pytest.approx(1 / 3)


def test_agreement_of_nothing_is_empty() -> None:
    report = agreement([Judgement(1, "alice", "failure")])
    assert (report.items, report.pairs, report.mean_kappa) == (0, [], None)
    assert report.critical_step_exact.fraction is None


# --- distributions --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "length", "expected"),
    [(0, 10, 0), (5, 10, 5), (9, 10, 9), (2, 3, 6), (0, 1, 0), (10, 10, 9), (99, 200, 4)],
)
def test_position_bin(step: int, length: int, expected: int) -> None:
    assert position_bin(step, length) == expected


def test_position_counts_fill_every_bin_and_skip_empty_trajectories() -> None:
    counts = position_counts([(0, 10), (0, 3), (9, 10), (3, 4), (0, 0)])
    assert counts[0] == ("0–10%", 2)
    assert counts[7] == ("70–80%", 1)
    assert counts[9] == ("90–100%", 1)
    assert sum(count for _, count in counts) == 4 and len(counts) == 10


def test_category_counts_put_the_most_frequent_first_and_keep_unused_ones() -> None:
    counts = category_counts({"b": 2, "z": 1, "a": 2}, ["a", "b", "c"])
    assert counts == [("a", 2), ("b", 2), ("z", 1), ("c", 0)]


def test_bars_are_as_wide_as_their_share_of_the_largest() -> None:
    widths = [(b.label, b.count, b.width_text) for b in bars([("x", 4), ("y", 1), ("z", 0)])]
    assert widths == [("x", 4, "100.0"), ("y", 1, "25.0"), ("z", 0, "0.0")]
    assert bars([("x", 0)])[0].width == 0.0


# --- the page -------------------------------------------------------------------------------


def trajectory_in(project: Project, number: int, steps: int = 10) -> Trajectory:
    task, _ = Task.objects.get_or_create(project=project, external_id="task")
    return Trajectory.objects.create(
        project=project,
        task=task,
        source_format="test",
        content_hash=f"hash-{number}",
        step_count=steps,
    )


def label(trajectory: Trajectory, who: str, **fields) -> None:
    if who.startswith("gold"):
        who_fields = {"source": Annotation.Source.GOLD, "source_name": who}
    else:
        author, _ = User.objects.get_or_create(username=who)
        who_fields = {"source": Annotation.Source.HUMAN, "author": author}
    Annotation.objects.create(trajectory=trajectory, **who_fields, **fields)
    refresh([trajectory.pk])


@pytest.fixture
def annotator(client: Client, project: Project) -> Client:
    user = User.objects.create_user("annotator")
    Membership.objects.create(project=project, user=user, role=Membership.Role.ANNOTATOR)
    client.force_login(user)
    return client


def test_it_redirects_anonymous_users_to_login(client: Client, project: Project) -> None:
    response = client.get("/p/demo/agreement/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/p/demo/agreement/"


def test_it_gives_404_to_users_without_membership(client: Client, project: Project) -> None:
    client.force_login(User.objects.create_user("mallory"))
    assert client.get("/p/demo/agreement/").status_code == 404


def test_it_gives_404_for_a_queue_of_another_project(annotator: Client, project: Project) -> None:
    other = Project.objects.create(slug="other", name="Other")
    queue = Queue.objects.create(project=other, name="theirs")
    assert annotator.get(f"/p/demo/agreement/?queue={queue.pk}").status_code == 404
    assert annotator.get("/p/demo/agreement/?queue=x").status_code == 404


def test_the_page_shows_agreement_of_humans_and_gold(annotator: Client, project: Project) -> None:
    first, second, alone = (trajectory_in(project, n) for n in range(3))
    label(first, "alice", verdict="failure", first_critical_step=3, error_category="wrong_tool")
    label(first, "gold-ww", verdict="failure", first_critical_step=4, error_category="wrong_tool")
    label(second, "alice", verdict="success")
    label(second, "gold-ww", verdict="failure", first_critical_step=9, error_category="other")
    label(alone, "alice", verdict="failure", first_critical_step=0, error_category="other")
    label(alone, "bob", verdict="failure", status=Annotation.Status.DRAFT)
    response = annotator.get("/p/demo/agreement/")
    assert response.status_code == 200
    report = response.context["report"]
    assert (report.items, report.annotators) == (2, 2)
    (pair,) = report.pairs
    assert (pair.first, pair.second, pair.items) == ("alice", "gold-ww (gold)", 2)
    assert pair.verdict.counts == [[1, 0], [1, 0]]
    assert report.critical_step_exact == Rate(agree=0, n=1, items=1)
    assert report.critical_step_within_one == Rate(agree=1, n=1, items=1)
    assert report.category == Rate(agree=1, n=1, items=1)
    html = response.content.decode()
    assert "gold-ww (gold)" in html and "<script" not in html.split("</head>")[1]


def test_the_charts_count_effective_labels(annotator: Client, project: Project) -> None:
    for number, (step, category) in enumerate([(0, "wrong_tool"), (3, "wrong_tool"), (9, "")]):
        trajectory = trajectory_in(project, number)
        label(trajectory, "alice", first_critical_step=step, error_category=category)
    context = annotator.get("/p/demo/agreement/").context
    categories = {bar.label: bar.count for bar in context["category_bars"]}
    assert categories["wrong_tool"] == 2 and categories["other"] == 0
    assert context["category_total"] == 2
    positions = [bar.count for bar in context["position_bars"]]
    assert positions == [1, 0, 0, 1, 0, 0, 0, 0, 0, 1]
    assert context["position_total"] == 3


def test_a_queue_limits_the_page_to_its_trajectories(annotator: Client, project: Project) -> None:
    inside, outside = trajectory_in(project, 1), trajectory_in(project, 2)
    for trajectory in (inside, outside):
        label(trajectory, "alice", verdict="failure", first_critical_step=1)
        label(trajectory, "bob", verdict="failure", first_critical_step=1)
    queue = Queue.objects.create(project=project, name="batch 1")
    QueueItem.objects.create(queue=queue, trajectory=inside, position=0)
    context = annotator.get(f"/p/demo/agreement/?queue={queue.pk}").context
    assert context["queue"] == queue
    assert context["report"].items == 1
    assert context["position_total"] == 1
    assert annotator.get("/p/demo/agreement/").context["report"].items == 2
