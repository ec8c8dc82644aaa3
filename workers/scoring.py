"""Scoring every assistant step of trajectories with a reward model, stored as step scores
(source `reward_model`, named by the model) beside judges' per-step scores and human labels;
the review page's strips and the stepwise export read them."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from annotate.models import StepScore
from workers.backends.reward_model import RewardModelScorer
from workers.corrections.actions import chat_messages
from workers.judging.runs import payloads

SCORE_TASK = "workers.score_steps"
_scorers: dict[tuple[str, str], RewardModelScorer] = {}


def scorer(model: str, device: str = "auto") -> RewardModelScorer:
    if (model, device) not in _scorers:
        _scorers[(model, device)] = RewardModelScorer(model, device)
    return _scorers[(model, device)]


def score_trajectories(
    model: str, trajectory_ids: Iterable[int], name: str = "", device: str = "auto"
) -> int:
    """Score the assistant steps of these trajectories; scores of the same name are replaced
    (so running twice stores the same rows once). Returns the number of steps scored."""
    name = name or f"rm:{model.rstrip('/').rsplit('/', 1)[-1]}"
    data = payloads(sorted(set(trajectory_ids)))
    targets: list[tuple[int, int]] = []
    conversations = []
    for pk, trajectory in data.items():
        steps = trajectory["steps"]
        messages = chat_messages(steps)
        for position, step in enumerate(steps):
            if step["role"] == "assistant":
                targets.append((pk, step["index"]))
                conversations.append(messages[: position + 1])
    scores = scorer(model, device).score(conversations) if conversations else []
    with transaction.atomic():
        StepScore.objects.filter(trajectory_id__in=list(data), source_name=name).delete()
        StepScore.objects.bulk_create(
            StepScore(
                trajectory_id=pk,
                step_index=index,
                source=StepScore.Source.REWARD_MODEL,
                source_name=name,
                score=score,
            )
            for (pk, index), score in zip(targets, scores, strict=True)
        )
    return len(scores)
