"""The filters every kind shares: label source, agreement, category, step scores, models and
roles, tasks, length in steps, characters or tokens, and the sample limit."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from annotate.models import Annotation, StepScore
from tests.curation.export_helpers import export, judge, load, record, rows, steps, stored

pytestmark = pytest.mark.django_db

ALL_TRAIN = {"test_fraction": 0}
GOLD = {"verdict": "failure", "first_critical_step": 4, "category": "wrong_arguments"}


@pytest.fixture
def runs(project) -> dict[str, int]:
    made = load(
        project,
        [
            record(1, "t1", True, model="big-70b", role="teacher"),
            record(2, "t2", False, labels=GOLD),
            record(3, "t3", False),
            record(5, "t5", None),
            record(6, "t6", None, steps=[*steps(6), *steps(6)[1:3]]),
            record(7, "t7", True),
        ],
    )
    by = dict(
        zip(["outcome", "gold", "judged", "judge", "heuristic", "disputed"], made, strict=True)
    )
    judge(by["judged"], "failure", 4, error_category="premature_answer")
    judge(by["judge"], "success")
    judge(by["heuristic"], "success", source=Annotation.Source.HEURISTIC, source_name="heuristic")
    for name, verdict in (("ann", "success"), ("bob", "failure")):
        user = User.objects.create_user(name)
        judge(by["disputed"], verdict, source=Annotation.Source.HUMAN, source_name="", author=user)
    for index, score in ((2, 0.9), (4, 0.4)):
        StepScore.objects.create(
            trajectory=by["outcome"], step_index=index, source="judge", score=score
        )
    StepScore.objects.create(trajectory=by["judge"], step_index=2, source="reward_model", score=0.7)
    return {name: run.pk for name, run in by.items()}


def picked(project, runs, **filters) -> set[str]:
    names = {pk: name for name, pk in runs.items()}
    return {
        names[r["trajectory_id"]] for r in rows(export(project, "unpaired", **ALL_TRAIN, **filters))
    }


def test_minimum_label_source(project, runs):
    assert picked(project, runs, min_source="gold") == {"gold"}
    assert picked(project, runs, min_source="human") == {"gold"}
    # the humans of `disputed` disagree, so its verdict is the run's own outcome
    assert picked(project, runs, min_source="outcome") == {"gold", "outcome", "judged", "disputed"}
    assert picked(project, runs, min_source="judge") == set(runs) - {"heuristic"}
    assert picked(project, runs, min_source="heuristic") == set(runs)


def test_agreement_category_and_verdict(project, runs):
    assert picked(project, runs, require_agreement=True) == set(runs) - {"disputed"}
    assert picked(project, runs, categories=["wrong_arguments"]) == {"gold"}
    assert picked(project, runs, categories=["premature_answer", "wrong_arguments"]) == {
        "gold",
        "judged",
    }
    assert picked(project, runs, verdicts=["failure"]) == {"gold", "judged"}


def test_step_score_bounds(project, runs):
    assert picked(project, runs, step_score_min=0.5) == {"judge"}  # `outcome` has a 0.4
    assert picked(project, runs, step_score_max=0.8) == {"judge"}  # and a 0.9
    assert picked(project, runs, step_score_min=0.3, step_score_max=0.95) == {"outcome", "judge"}


def test_models_roles_tasks_steps_and_limit(project, runs):
    assert picked(project, runs, agent_models=["big-70b"]) == {"outcome"}
    assert picked(project, runs, agent_roles=["teacher"]) == {"outcome"}
    assert picked(project, runs, tasks=["t2", "t3"]) == {"gold", "judged"}
    assert picked(project, runs, min_steps=6) == {"heuristic"}
    assert picked(project, runs, max_steps=5) == set(runs) - {"heuristic"}
    limited = rows(export(project, "unpaired", limit=2, **ALL_TRAIN))
    assert [r["trajectory_id"] for r in limited] == [runs["outcome"], runs["gold"]]


@pytest.fixture
def lengths(project) -> None:
    load(
        project,
        [
            record(1, "short", True),
            record(2, "wordy", True, steps=steps(2, answer="word " * 200)),
            record(3, "blob", True, steps=steps(3, answer="x" * 1000)),
        ],
    )


def sft_tasks(project, **filters) -> set[str]:
    return {r["task_id"] for r in rows(export(project, "sft", **ALL_TRAIN, **filters))}


def test_length_in_characters(project, lengths):
    assert sft_tasks(project, max_length=500) == {"short"}
    assert sft_tasks(project, min_length=500) == {"wordy", "blob"}


def test_length_in_tokens_of_a_local_tokenizer(project, lengths, tmp_path):
    backend = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    folder = tmp_path / "tokenizer"
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]").save_pretrained(folder)

    done = export(project, "sft", max_length=100, tokenizer=str(folder), **ALL_TRAIN)
    assert {r["task_id"] for r in rows(done)} == {"short", "blob"}  # one long word is one token
    assert done.counts["skipped"] == {"longer than max_length": 1}
    assert f"tokens of `{folder}`" in stored(done)["README.md"].read_text()
