"""Turn scoring with a reward model: a tiny randomly initialised classification model built
here (no download) scores every assistant step; the scores land as step scores and show on
the review page's strip."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from annotate.models import StepScore
from tests.annotate.helpers import client_for, make_member, make_trajectory
from tests.workers.tiny_model import _tokenizer
from workers import scoring

STEPS = [
    {"role": "user", "content": "Find a flight to Paris"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "a", "name": "search", "arguments": {"to": "PAR"}}],
    },
    {"role": "tool", "content": "AF1", "tool_call_id": "a"},
    {"role": "assistant", "content": "AF1 leaves at 9."},
]


def tiny_reward_model(folder: Path, labels: int) -> str:
    import torch
    from transformers import LlamaConfig, LlamaForSequenceClassification

    tokenizer = _tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_labels=labels,
        pad_token_id=tokenizer.pad_token_id,
    )
    LlamaForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.mark.django_db
@pytest.mark.parametrize("labels", [1, 2])
def test_every_assistant_step_gets_a_reward_model_score(project, tmp_path, labels) -> None:
    model = tiny_reward_model(tmp_path / "rm", labels)
    one = make_trajectory(project, STEPS)
    two = make_trajectory(project, STEPS[:2])

    assert scoring.score_trajectories(model, [one.pk, two.pk], name="rm-test") == 3
    assert scoring.score_trajectories(model, [one.pk, two.pk], name="rm-test") == 3  # replaces

    rows = list(
        StepScore.objects.order_by("trajectory_id", "step_index").values_list(
            "trajectory_id", "step_index", "source", "source_name"
        )
    )
    assert rows == [
        (one.pk, 1, "reward_model", "rm-test"),
        (one.pk, 3, "reward_model", "rm-test"),
        (two.pk, 1, "reward_model", "rm-test"),
    ]
    scores = list(
        StepScore.objects.order_by("trajectory_id", "step_index").values_list("score", flat=True)
    )
    assert scores[0] == scores[2]  # the same conversation prefix scores the same, batched or not
    if labels == 2:
        assert all(0 <= s <= 1 for s in scores)

    researcher = client_for(make_member(project, "rita", "researcher"))
    assert "rm-test" in researcher.get(f"/t/{one.pk}/").content.decode()


@pytest.mark.django_db
def test_the_command_scores_a_project_in_process(project, tmp_path) -> None:
    model = tiny_reward_model(tmp_path / "rm", 1)
    make_trajectory(project, STEPS)
    out = io.StringIO()
    call_command("score_steps", project="demo", model=model, here=True, stdout=out)
    assert "Scored 2 assistant steps of 1 trajectories" in out.getvalue()
    assert StepScore.objects.filter(source_name="rm:rm").count() == 2
