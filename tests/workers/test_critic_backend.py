"""The critic as a judge: the `critic` backend's replies, a critic judge run end to end, and its
suggestions kept apart from people's labels (never a human annotation, never training data,
never the annotator's own value on the review page)."""

from __future__ import annotations

import json
import re

import pytest

from annotate.models import Annotation, EffectiveLabel, StepScore
from curation.models import Membership, Trajectory
from tests.annotate.helpers import client_for, make_member
from tests.workers.critic_data import add_run, examples, payload, steps_of
from workers.backends import BackendError, GenerationRequest, make_backend
from workers.critic import artifact, jobs, training
from workers.critic.encoder import make_encoder
from workers.judging import runs
from workers.judging.compare import compare, reference_labels
from workers.judging.schema import judgement_schema, parse


@pytest.fixture
def artifact_path(tmp_path):
    result = training.train(examples(12), make_encoder("hashing"), training.Settings("hashing"))
    return str(artifact.save(result.critic, tmp_path / "critic-v1.npz"))


def ask(steps: list[dict], question: str = "judge", with_steps: bool = True) -> GenerationRequest:
    context = {"question": question, "trajectory": payload(steps), "with_steps": with_steps}
    return GenerationRequest(messages=[], context=context)


def test_the_backend_suggests_a_step_and_an_agent_without_a_verdict(artifact_path) -> None:
    backend = make_backend("critic", artifact_path)
    steps, critical = steps_of(40)
    other, _ = steps_of(41)
    first, second = backend.generate([ask(steps), ask(other, with_steps=False)])
    reply = parse(first.text, judgement_schema(len(steps), [], with_steps=True, verdict_free=True))
    assert reply["verdict"] == ""
    assert reply["first_critical_step"] == critical
    assert reply["responsible_agent"] == steps[critical]["name"]
    assert 0 < reply["confidence"] <= 100
    assert "not a verdict" in reply["rationale"]
    labels = {s["step"]: (s["label"], s["score"]) for s in reply["steps"]}
    assert labels[critical] == ("regression", -10)
    assert {labels[i][0] for i in range(critical)} == {"progress"}
    assert {labels[i][0] for i in range(critical + 1, len(steps))} <= {"no_progress"}
    assert "steps" not in json.loads(second.text)


def test_the_backend_answers_what_it_can_and_says_why_not_for_the_rest(artifact_path) -> None:
    backend = make_backend("critic", artifact_path)
    steps, _ = steps_of(3)
    bad = GenerationRequest(messages=[], context={"question": "judge", "trajectory": {}})
    results = backend.generate([ask(steps, "half"), bad, ask(steps, "step_scores")])
    assert "use strategy all_at_once" in results[0].error
    assert "steps is missing" in results[1].error
    assert results[2].ok and set(json.loads(results[2].text)) == {"steps"}
    with pytest.raises(BackendError, match="no critic artifact"):
        make_backend("critic", artifact_path + ".gone")


@pytest.mark.django_db
def test_a_critic_judge_run_writes_suggestions_that_are_never_human_labels(project) -> None:
    labelled = [add_run(project, i) for i in range(10)]
    unlabelled = [add_run(project, i, gold=False) for i in range(10, 13)]
    critic = jobs.train(jobs.request(project, encoder="hashing", send=False).pk)
    config = jobs.use_as_judge(critic, None)
    batch = runs.start_batch(config, Trajectory.objects.filter(project=project), send=False)
    counts = runs.judge(config.current_version.pk, [t.pk for t in labelled + unlabelled], batch.pk)
    assert counts == {"done": 13, "failed": 0, "skipped": 0}

    suggestions = Annotation.objects.filter(source_name="critic v1")
    assert suggestions.count() == 13
    for suggestion in suggestions:
        assert (suggestion.source, suggestion.author, suggestion.verdict) == ("judge", None, "")
        assert suggestion.first_critical_step is not None and 0 < suggestion.confidence <= 1
    scores = StepScore.objects.filter(source_name="critic v1")
    assert scores.count() == sum(t.step_count for t in labelled + unlabelled)
    assert set(scores.values_list("source", flat=True)) == {StepScore.Source.JUDGE}

    assert not Annotation.objects.filter(source=Annotation.Source.HUMAN).exists()
    assert reference_labels(project, "humans") == {}
    for label in EffectiveLabel.objects.filter(trajectory__in=unlabelled):
        assert not label.has_human
        assert label.first_critical_step_source == EffectiveLabel.Source.JUDGE
    assert len(jobs.labels(project, "effective")) == 10  # its own steps never train it

    report = compare(project, "critic", "gold").report
    assert report.step_exact.n == 10 and report.step_exact.value >= 0.7


@pytest.mark.django_db
def test_the_review_page_offers_the_suggestion_without_filling_the_form(project) -> None:
    for i in range(8):
        add_run(project, i)
    trajectory = add_run(project, 20, gold=False)
    critic = jobs.train(jobs.request(project, encoder="hashing", send=False).pk)
    config = jobs.use_as_judge(critic, None)
    runs.judge(config.current_version.pk, [trajectory.pk])
    suggested = Annotation.objects.get(trajectory=trajectory, source_name="critic v1")

    annotator = make_member(project, "ann", Membership.Role.ANNOTATOR)
    html = client_for(annotator).get(f"/t/{trajectory.pk}/").content.decode()
    assert f'id="critic-suggestion" data-step="{suggested.first_critical_step}"' in html
    assert '<span class="badge suggestion">suggestion</span>' in html
    assert "Not your label until you mark it" in html
    field = re.search(r'<input[^>]*name="first_critical_step"[^>]*>', html)
    assert field is not None and "value=" not in field[0]  # the annotator's field stays empty
    assert not Annotation.objects.filter(trajectory=trajectory, author=annotator).exists()


@pytest.mark.django_db
def test_the_suggestion_card_escapes_what_came_from_the_trajectory(project) -> None:
    trajectory = add_run(project, 0, gold=False)
    Annotation.objects.create(
        trajectory=trajectory,
        source=Annotation.Source.JUDGE,
        source_name="critic v1",
        verdict="",
        first_critical_step=2,
        responsible_agent="<img src=x onerror=alert(1)>",
        confidence=0.4,
    )
    annotator = make_member(project, "ann", Membership.Role.ANNOTATOR)
    html = client_for(annotator).get(f"/t/{trajectory.pk}/").content.decode()
    card = html[html.index('id="critic-suggestion"') :]
    card = card[: card.index("</section>")]
    assert "by &lt;img src=x onerror=alert(1)&gt;" in card and "<img" not in card
