"""The `critic` backend: a trained step critic (workers/critic/) answering as a judge, with no
prompt. `model` is the path of its artifact; options: `device` ("auto", "cpu", "cuda") for the
encoder, `cache` for the embedding cache file (default: next to the artifact).

Like the heuristic it reads `request.context` (the trajectory's steps) and answers the
whole-trajectory question with the critic's suggestion: no verdict (the critic locates an
error, it does not decide that there is one), the most likely first critical step, the agent
with the most probability over its steps, the calibrated probability of the step as the
confidence, and the top steps in the rationale. With per-step labels asked for, every step
gets a score of -10 (the critic's top step) to 0 by its probability relative to the top one,
and a label by where it lies against the suggested step: before it progress, at it
regression, after it no_progress (what a first critical error means: nothing after it can
save the run). Requests of one `generate` call are encoded together.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workers.backends.base import BackendError, GenerationRequest, GenerationResult
from workers.backends.heuristic import ContextError
from workers.critic import artifact, features, training
from workers.critic.encoder import EncoderError, make_encoder
from workers.judging.schema import AGENT_MAX, SCORE_TENTHS

QUESTIONS = ("judge", "step_scores")
SHOWN = 3  # steps named in the rationale


class CriticBackend:
    kind = "critic"

    def __init__(self, model: str, device: str = "auto", cache: str = "") -> None:
        self.model = model
        try:
            self.critic, self.header = artifact.load(model)
            cache_path = Path(cache) if cache else cache_file(Path(model), self.critic.encoder)
            self.encoder = make_encoder(self.critic.encoder, cache_path, device)
        except (artifact.ArtifactError, EncoderError) as error:
            raise BackendError(str(error)) from None
        self.name = Path(model).stem

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        started = time.perf_counter()
        results = [GenerationResult() for _ in requests]
        tables: dict[int, features.StepTable] = {}
        for position, request in enumerate(requests):
            try:
                tables[position] = features.read(_trajectory(request.context))
            except ContextError as error:
                results[position].error = str(error)
        if not tables:
            return results
        try:
            encoded = training.embed(list(tables.values()), self.encoder)
        except Exception as error:  # the encoder failed: every request says why
            for position in tables:
                results[position].error = f"critic failed: {type(error).__name__}: {error}"
            return results
        predictions = training.predict(self.critic, encoded)
        share = (time.perf_counter() - started) / len(tables)
        for position, prediction in zip(tables, predictions, strict=True):
            reply = self.reply(prediction, requests[position].context)
            results[position].text = json.dumps(reply, ensure_ascii=False)
            results[position].latency_s = share
        return results

    def close(self) -> None:
        """Nothing to release: the encoder stays loaded for the process (module cache)."""

    def reply(self, prediction: training.Prediction, context: dict[str, Any]) -> dict[str, Any]:
        steps = step_scores(prediction)
        if context.get("question") == "step_scores":
            return {"steps": steps}
        top = prediction.probabilities.argsort()[::-1][:SHOWN]
        agent, agent_p = prediction.agent()
        listed = ", ".join(f"step {i} ({prediction.probabilities[i]:.0%})" for i in top)
        rationale = (
            f"Learned step critic {self.name}: most likely first critical error {listed}"
            + (f"; agent {agent[:AGENT_MAX]} ({agent_p:.0%})" if agent else "")
            + ". A suggestion, not a verdict."
        )
        reply: dict[str, Any] = {
            "verdict": "",
            "first_critical_step": prediction.step,
            "root_cause_step": prediction.step,
            "error_category": "",
            "responsible_agent": agent[:AGENT_MAX],
            "rationale": rationale,
            "confidence": round(100 * prediction.confidence),
        }
        if context.get("with_steps"):
            reply["steps"] = steps
        return reply


def cache_file(artifact_path: Path, encoder: str) -> Path:
    """Where the embeddings of an artifact's encoder are kept: beside the artifact."""
    return artifact_path.parent / f"embeddings-{encoder}.sqlite3"


def _trajectory(context: Any) -> dict[str, Any]:
    if not isinstance(context, dict):
        raise ContextError("the critic reads request.context, and there is none")
    if context.get("question") not in QUESTIONS:
        raise ContextError(
            f"the critic answers whole-trajectory judgements and step scores only, not "
            f"{context.get('question')!r}; use strategy all_at_once"
        )
    trajectory = context.get("trajectory")
    if not isinstance(trajectory, dict) or not isinstance(trajectory.get("steps"), list):
        raise ContextError("context.trajectory.steps is missing or not a list")
    return trajectory


def step_scores(prediction: training.Prediction) -> list[dict[str, Any]]:
    p = prediction.probabilities
    suggested, top = prediction.step, float(p.max())
    out = []
    for index, value in enumerate(p):
        if index < suggested:
            label = "progress"
        elif index == suggested:
            label = "regression"
        else:
            label = "no_progress"
        score = -round(SCORE_TENTHS * float(value) / top) if top > 0 else 0
        out.append({"step": index, "label": label, "score": score})
    return out
