"""What each kind writes for a small project: a success, a failure with a judged critical step,
an accepted one-step correction of it and a rejected rollout correction."""

from __future__ import annotations

import json

import pytest

from annotate.models import StepScore
from curation.exports.messages import dumps
from curation.models import Project, Trajectory
from tests.curation.export_helpers import (
    TOOLS,
    correct,
    export,
    judge,
    load,
    record,
    rows,
    steps,
    stored,
)

pytestmark = pytest.mark.django_db

ALL_TRAIN = {"test_fraction": 0}


@pytest.fixture
def runs(project: Project) -> dict[str, Trajectory]:
    success, failure = load(project, [record(0, "t0", True), record(1, "t0", False)])
    judge(failure, "failure", 4, error_category="wrong_arguments")
    fixed = correct(failure, 4, [{"role": "assistant", "content": "fixed 1"}])
    rejected = correct(
        failure,
        2,
        [
            {"role": "assistant", "content": "let me think"},
            {"role": "user", "content": "ok"},
            {"role": "assistant", "content": "still wrong"},
        ],
        accepted=False,
    )
    return {"success": success, "failure": failure, "fixed": fixed, "rejected": rejected}


def message(role: str, content: str, **fields: object) -> dict:
    return {"role": role, "content": content, "name": None, "tool_calls": None,
            "tool_call_id": None, **fields}  # fmt: skip


def opening(n: int) -> list[dict]:
    """The first four steps of `steps(n)` as exported messages."""
    function = {"name": "lookup", "arguments": f'{{"n":{n}}}'}
    call = {"id": f"c{n}", "type": "function", "function": function}
    return [
        message("system", "You look numbers up."),
        message("user", f"please look up {n}"),
        message("assistant", "", tool_calls=[call]),
        message("tool", f'{{"n": {n}}}', name="lookup", tool_call_id=f"c{n}"),
    ]


def test_sft_has_successes_and_accepted_corrections_only(project, runs):
    out = rows(export(project, "sft", **ALL_TRAIN))
    assert [r["trajectory_id"] for r in out] == [runs["success"].pk, runs["fixed"].pk]
    assert [r["source"] for r in out] == ["run", "correction"]
    assert out[0]["messages"] == [*opening(0), message("assistant", "done 0")]
    assert out[1]["messages"] == [*opening(1), message("assistant", "fixed 1")]
    assert json.loads(out[0]["tools"]) == TOOLS
    assert out[0]["verdict_source"] == "outcome"
    assert out[1]["verdict_source"] == "judge"


def test_sft_loss_after_branch_weights_only_the_teachers_steps(project, runs):
    out = rows(export(project, "sft", loss_after_branch=True, **ALL_TRAIN))
    weights = {r["source"]: [m["weight"] for m in r["messages"]] for r in out}
    assert weights == {"run": [0, 0, 1, 0, 1], "correction": [0, 0, 0, 0, 1]}


def test_preference_pairs_a_correction_with_the_step_it_replaced(project, runs):
    [pair] = rows(export(project, "preference", **ALL_TRAIN))
    assert pair["pair_type"] == "correction"
    assert pair["prompt"] == opening(1)
    assert pair["chosen"] == [message("assistant", "fixed 1")]
    assert pair["rejected"] == [message("assistant", "done 1")]
    assert pair["branch_step"] == 4
    assert (pair["chosen_trajectory_id"], pair["rejected_trajectory_id"]) == (
        runs["fixed"].pk,
        runs["failure"].pk,
    )


def test_preference_rollout_correction_is_compared_with_the_original_to_its_end(project):
    [failure] = load(project, [record(5, "t5", False)])
    judge(failure, "failure", 2)
    rollout = [
        {"role": "assistant", "content": "I need the number first."},
        {"role": "user", "content": "it is 5"},
        {"role": "assistant", "content": "5 is five"},
    ]
    correct(failure, 2, rollout)
    [pair] = rows(export(project, "preference", **ALL_TRAIN))
    assert [m["content"] for m in pair["chosen"]] == [s["content"] for s in rollout]
    assert [m["role"] for m in pair["rejected"]] == ["assistant", "tool", "assistant"]


def test_preference_outcome_pairs_part_at_the_first_different_assistant_step(project):
    shared = steps(7)
    failed = [*shared[:4], {"role": "assistant", "content": "it is 8"}]
    # Same conversation, but the run numbers its tool calls its own way.
    renumbered = json.loads(json.dumps(shared).replace('"c7"', '"call-xyz"'))
    success, failure = load(
        project,
        [record(7, "t7", True, steps=renumbered), record(8, "t7", False, steps=failed)],
    )
    [pair] = rows(export(project, "preference", pairs=["outcome"], **ALL_TRAIN))
    assert pair["pair_type"] == "outcome"
    assert pair["branch_step"] == 4
    assert pair["prompt"] == opening(7)  # the failed run's own messages
    assert pair["chosen"] == [message("assistant", "done 7")]
    assert pair["rejected"] == [message("assistant", "it is 8")]
    assert pair["chosen_trajectory_id"] == success.pk
    assert pair["rejected_trajectory_id"] == failure.pk


def test_unpaired_cuts_a_failure_at_its_critical_step(project, runs):
    out = {r["trajectory_id"]: r for r in rows(export(project, "unpaired", **ALL_TRAIN))}
    assert set(out) == {runs["success"].pk, runs["failure"].pk, runs["fixed"].pk}
    good, bad, fixed = out[runs["success"].pk], out[runs["failure"].pk], out[runs["fixed"].pk]
    assert (good["label"], good["start_step"], len(good["prompt"])) == (True, 2, 2)
    assert good["completion"] == [*opening(0)[2:], message("assistant", "done 0")]
    assert (bad["label"], bad["start_step"], bad["prompt"]) == (False, 4, opening(1))
    assert bad["completion"] == [message("assistant", "done 1")]
    assert (fixed["label"], fixed["completion"]) == (True, [message("assistant", "fixed 1")])


def test_stepwise_labels_steps_up_to_the_critical_one(project, runs):
    out = {r["trajectory_id"]: r for r in rows(export(project, "stepwise", **ALL_TRAIN))}
    bad = out[runs["failure"].pk]
    assert bad["prompt"] == "system: You look numbers up.\n\nuser: please look up 1"
    assert bad["completions"] == [
        'assistant: <tool_call>{"arguments":{"n":1},"name":"lookup"}</tool_call>',
        'tool (lookup): {"n": 1}\n\nassistant: done 1',
    ]
    assert (bad["labels"], bad["step_indices"]) == ([True, False], [2, 4])
    assert out[runs["success"].pk]["labels"] == [True, True]
    assert runs["rejected"].pk not in out


def test_stepwise_explicit_scores_win_over_the_verdict(project, runs):
    success = runs["success"]
    StepScore.objects.create(trajectory=success, step_index=4, source="judge", score=0.2)
    StepScore.objects.create(trajectory=success, step_index=2, source="reward_model", score=0.9)
    StepScore.objects.create(trajectory=success, step_index=2, source="human", label="regression")

    def labels(**options: object) -> list[bool]:
        out = rows(export(project, "stepwise", tasks=["t0"], **ALL_TRAIN, **options))
        return next(r["labels"] for r in out if r["trajectory_id"] == success.pk)

    assert labels() == [False, False]  # the human's label beats the reward model's score
    assert labels(step_threshold=0.1) == [False, True]


def test_rl_prefix_is_the_verified_prefix_with_the_reference(project, runs):
    [row] = rows(export(project, "rl_prefix", **ALL_TRAIN))
    assert row["trajectory_id"] == runs["failure"].pk
    assert row["prompt"] == opening(1)
    assert row["critical_step"] == 4
    assert row["critical_step_source"] == "judge"
    assert json.loads(row["reference"]) == {"answer": "t0"}
    assert row["tools"] == dumps(TOOLS)


def test_manifest_counts_label_sources_and_categories(project, runs):
    done = export(project, "unpaired", **ALL_TRAIN)
    manifest = done.manifest
    assert manifest["counts"]["rows"] == 3
    assert manifest["label_sources"]["verdict"] == {"judge": 1, "outcome": 2}
    assert manifest["label_sources"]["first_critical_step"] == {"judge": 1}
    assert manifest["error_categories"] == {"wrong_arguments": 1}
    assert manifest["kind"] == "unpaired" and manifest["schema_version"] == 1
    names = [f["name"] for f in manifest["files"]]
    assert names == ["train.jsonl", "README.md"]
    card = stored(done)["README.md"].read_text()
    assert "  - split: train\n    path: train.jsonl\n" in card  # the Hub reads its files here
    assert "| wrong_arguments | 1 |" in card  # the error-category table
    assert "| train | 3 |" in card and "| judge | 1 |" in card
    assert "| label | true for a success or an accepted correction" in card
