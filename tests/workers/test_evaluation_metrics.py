"""Judge-vs-reference metrics (workers/judging/evaluation.py), on hand-computed examples."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from workers.judging.evaluation import Label, evaluate, rate

REFERENCE = {
    "a": Label("failure", 3, "wrong_tool", "Planner"),
    "b": Label("failure", 5, "wrong_arguments", "Coder"),
    "c": Label("success"),
    "d": Label("failure", 2, "other", ""),
    "e": Label("partial", 7, "wrong_tool", "Critic"),
    "only-reference": Label("failure", 1, "other", "Planner"),
}
JUDGE = {
    "a": Label("failure", 3, "wrong_tool", " planner "),
    "b": Label("failure", 6, "wrong_tool", "Planner"),
    "c": Label("failure", 1, "wrong_tool"),
    "d": Label("partial", None, ""),
    "e": Label("partial", 10, "wrong_tool", "Critic"),
    "only-judge": Label("success"),
}


def test_hand_computed_example():
    report = evaluate(JUDGE, REFERENCE)

    assert report.n == 5
    assert (report.verdict.correct, report.verdict.n) == (3, 5)
    assert report.confusion_labels == ["failure", "partial", "success"]
    # rows: the reference's verdict; columns: the judge's
    assert report.confusion == [[2, 1, 0], [0, 1, 0], [1, 0, 0]]
    # observed 3/5; expected (3*3 + 1*2 + 1*0) / 25 = 11/25
    assert report.kappa == pytest.approx((3 / 5 - 11 / 25) / (1 - 11 / 25))
    # the reference names steps on a, b, d, e; the judge names 3, 6, none, 10
    assert (report.step_exact.correct, report.step_exact.n) == (1, 4)
    assert (report.step_within_one.correct, report.step_within_one.n) == (2, 4)
    assert (report.step_within_three.correct, report.step_within_three.n) == (3, 4)
    # agents named with a step: a (matches, ignoring case and spaces), b (wrong), e (matches)
    assert (report.agent.correct, report.agent.n) == (2, 3)
    # categories named on a, b, d, e: a and e agree
    assert (report.category.correct, report.category.n) == (2, 4)
    assert report.category.value == 0.5


def test_items_only_one_side_labelled_are_ignored():
    shared = {k: v for k, v in REFERENCE.items() if k in JUDGE}
    assert evaluate(JUDGE, REFERENCE).as_dict() == evaluate(JUDGE, shared).as_dict()
    extra = {"x": Label("failure", 0, "other", "Planner")}
    assert evaluate({**JUDGE, **extra}, REFERENCE).as_dict() == evaluate(JUDGE, REFERENCE).as_dict()


def test_kappa_matches_a_direct_computation():
    verdicts = ("success", "partial", "failure")
    reference, judge = {}, {}
    for i in range(60):  # a fixed, uneven pattern of agreement
        reference[i] = Label(verdicts[i % 3])
        judge[i] = Label(verdicts[i % 3] if i % 4 else verdicts[(i + 1) % 3])
    report = evaluate(judge, reference)

    pairs = [(reference[i].verdict, judge[i].verdict) for i in range(60)]
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(first[v] * second[v] for v in verdicts) / n**2
    assert report.kappa == pytest.approx((observed - expected) / (1 - expected))
    assert report.verdict.value == pytest.approx(observed)
    assert report.kappa_interval.low <= report.kappa <= report.kappa_interval.high


def test_bootstrap_interval_holds_the_estimate_and_is_deterministic():
    outcomes = [i % 3 != 0 for i in range(90)]  # 60 of 90
    first, second = rate(outcomes), rate(list(outcomes))
    assert first == second
    assert first.value == pytest.approx(2 / 3)
    assert 0 <= first.interval.low < first.value < first.interval.high <= 1
    # about +-1.96 standard errors (0.05) wide on each side
    assert first.interval.high - first.interval.low == pytest.approx(0.19, abs=0.04)
    assert rate([True] * 7).interval == rate([True] * 7).interval
    assert (rate([True] * 7).interval.low, rate([True] * 7).interval.high) == (1.0, 1.0)


def test_the_report_is_deterministic_and_json_ready():
    first = evaluate(JUDGE, REFERENCE).as_dict()
    assert first == evaluate(dict(reversed(JUDGE.items())), REFERENCE).as_dict()
    text = json.dumps(first)
    data = json.loads(text)
    assert data["n"] == 5
    assert data["verdict"]["accuracy"] == {
        "correct": 3,
        "n": 5,
        "rate": 0.6,
        "low": data["verdict"]["accuracy"]["low"],
        "high": data["verdict"]["accuracy"]["high"],
    }
    low, high = data["verdict"]["accuracy"]["low"], data["verdict"]["accuracy"]["high"]
    assert 0 <= low <= 0.6 <= high <= 1
    assert data["verdict"]["confusion"]["counts"] == [[2, 1, 0], [0, 1, 0], [1, 0, 0]]
    assert data["first_critical_step"]["within_three"]["rate"] == 0.75
    assert data["agent"]["n"] == 3


def test_empty_input():
    for judge, reference in (({}, {}), (JUDGE, {}), ({"z": Label("success")}, REFERENCE)):
        report = evaluate(judge, reference)
        assert report.n == 0
        assert report.kappa is None
        assert (report.kappa_interval.low, report.kappa_interval.high) == (None, None)
        assert report.confusion_labels == [] and report.confusion == []
        for measure in (report.verdict, report.step_exact, report.agent, report.category):
            assert (measure.correct, measure.n, measure.value) == (0, 0, None)
            assert (measure.interval.low, measure.interval.high) == (None, None)
        json.dumps(report.as_dict())


def test_a_step_or_category_the_reference_lacks_is_not_counted():
    reference = {1: Label("success"), 2: Label("failure", 4, "", "")}
    judge = {1: Label("failure", 2, "other", "X"), 2: Label("failure", 4, "other", "X")}
    report = evaluate(judge, reference)
    assert (report.step_exact.correct, report.step_exact.n) == (1, 1)
    assert report.agent.n == 0
    assert report.category.n == 0
    assert (report.verdict.correct, report.verdict.n) == (1, 2)


def test_no_kappa_and_no_kappa_interval_when_chance_agreement_is_one():
    # one verdict on both sides throughout: no kappa, in the data or in any resample
    same = {i: Label("failure") for i in range(5)}
    report = evaluate(same, same)
    assert report.kappa is None
    assert (report.kappa_interval.low, report.kappa_interval.high) == (None, None)
    assert (report.verdict.correct, report.verdict.n) == (5, 5)
    assert report.confusion == [[5]]
