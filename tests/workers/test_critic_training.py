"""The critic without the database: features, training split by task, artifacts that reload
to the same scores, and the refusal to train on too little."""

from __future__ import annotations

import numpy as np
import pytest

from tests.workers.critic_data import examples, payload, steps_of
from workers.critic import artifact, features, training
from workers.critic.encoder import make_encoder
from workers.critic.model import fit_temperature

SETTINGS = training.Settings(encoder="hashing")


def test_features_mark_the_ignored_tool_error_and_the_step_after_it() -> None:
    steps, critical = steps_of(4)  # three pairs, the second one fails
    table = features.read(payload(steps))
    column = {name: i for i, name in enumerate(features.STRUCTURAL)}
    signal = table.structural[:, column["signal_ignored_tool_output_or_error"]]
    assert list(np.flatnonzero(signal)) == [critical]
    assert table.structural[critical - 1, column["result_error"]] == 1
    assert table.structural[critical - 2, column["next_result_error"]] == 1
    assert table.structural[critical, column["heuristic_pick"]] == 1
    assert table.names[critical] == steps[critical]["name"]
    assert table.names[0] == ""  # the user is nobody's agent


def test_training_holds_whole_tasks_out_and_reports_the_judge_measures(tmp_path) -> None:
    data = examples(20)
    data += [training.Example("twin", "task-3", data[3].trajectory, data[3].step, data[3].agent)]
    encoder = make_encoder("hashing", tmp_path / "cache.sqlite3")
    result = training.train(data, encoder, SETTINGS)

    train_idx, test_idx = training.split_by_task([e.task for e in data], 0.2, 0)
    held_out_tasks = {data[i].task for i in test_idx}
    assert held_out_tasks.isdisjoint(data[i].task for i in train_idx)
    assert set(result.held_out) == {data[i].key for i in test_idx}
    assert (
        result.summary["train"]["trajectories"] + result.summary["held_out"]["trajectories"] == 21
    )
    metrics = result.metrics
    assert metrics["n"] == len(test_idx)
    for key in ("step_exact", "step_within_one", "step_within_three", "agent"):
        assert set(metrics[key]) == {"correct", "n", "rate", "low", "high"}
    assert metrics["step_exact"]["rate"] >= 0.75  # the planted rule is easy to learn
    assert 0 <= metrics["calibration"]["ece"] <= 1


def test_an_artifact_reloads_and_predicts_the_same_scores(tmp_path) -> None:
    encoder = make_encoder("hashing", tmp_path / "cache.sqlite3")
    result = training.train(examples(12), encoder, SETTINGS)
    path = artifact.save(result.critic, tmp_path / "critic-v1.npz", {"version": 1})
    reloaded, header = artifact.load(path)
    assert header["version"] == 1 and header["encoder"] == "hashing"

    fresh = [payload(steps_of(i)[0]) for i in range(30, 36)]
    before = training.predict(result.critic, training.encode(fresh, encoder))
    after = training.predict(reloaded, training.encode(fresh, make_encoder("hashing")))
    for a, b in zip(before, after, strict=True):
        assert np.array_equal(a.probabilities, b.probabilities)
        assert a.probabilities.sum() == pytest.approx(1.0)


def test_a_file_that_is_not_an_artifact_is_refused(tmp_path) -> None:
    bad = tmp_path / "model.npz"
    np.savez(bad, weights=np.zeros(3))
    with pytest.raises(artifact.ArtifactError, match="not a critic artifact"):
        artifact.load(bad)
    with pytest.raises(artifact.ArtifactError, match="no critic artifact"):
        artifact.load(tmp_path / "missing.npz")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "0 labelled"),
        (examples(1), "1 labelled"),
        (
            [
                training.Example(i, "same-task", e.trajectory, e.step)
                for i, e in enumerate(examples(4))
            ],
            "1 task",
        ),
    ],
)
def test_too_few_labels_or_tasks_is_a_clear_error(data, message) -> None:
    with pytest.raises(training.NotEnoughLabels, match=message):
        training.train(data, make_encoder("hashing"), SETTINGS)


def test_the_agent_is_the_one_with_most_probability_over_its_steps() -> None:
    prediction = training.Prediction(np.array([0.1, 0.35, 0.3, 0.25]), ["", "a", "b", "b"])
    assert prediction.step == 1
    assert prediction.agent() == ("b", pytest.approx(0.55))


def test_the_temperature_fitted_on_held_out_scores_softens_overconfident_ones() -> None:
    rng = np.random.default_rng(0)
    scores, targets = [], []
    for _ in range(200):
        s = rng.normal(size=6) * 8  # sharp scores, right only when the top is the target
        targets.append(int(s.argmax()) if rng.random() < 0.4 else int(rng.integers(6)))
        scores.append(s)
    assert fit_temperature(scores, targets) > 1.5


def test_the_cache_gives_back_what_the_encoder_computed(tmp_path) -> None:
    path = tmp_path / "cache.sqlite3"
    texts = ["the lookup failed", "the price is 7", "the lookup failed"]
    first = make_encoder("hashing", path).encode(texts)
    again = make_encoder("hashing", path)
    assert np.array_equal(again.encode(texts), first)
    assert len(again.memory) == 2  # read from the file: two distinct texts
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0)


def test_the_minilm_encoder_loads_from_its_wheel_and_embeds_meaning() -> None:
    encoder = make_encoder("minilm")
    vectors = encoder.encode(
        [
            "The tool returned an error and the agent ignored it.",
            "The agent carried on although the tool call failed.",
            "The capital of France is Paris.",
        ]
    )
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3
