"""Every kind, written from the real tau-bench and Who&When runs plus generated corrections,
loads with `datasets` from JSONL and from Parquet (the same rows either way), is conversational
where TRL expects it, and renders through TRL's chat-template step with a tokenizer whose
template shows tools and tool calls."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach the network

import datasets  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402
from trl.data_utils import is_conversational, maybe_apply_chat_template  # noqa: E402

from curation.exports.kinds import BUILDERS  # noqa: E402
from curation.models import DatasetExport, Project, Trajectory  # noqa: E402
from tests.curation.export_helpers import correct, data_files, export, judge, record  # noqa: E402
from tests.curation.export_helpers import load as load_runs  # noqa: E402
from tests.curation.helpers import run_import  # noqa: E402

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]

CHAT_TEMPLATE = (
    "{% if tools %}<tools>{% for tool in tools %}{{ tool.function.name }};{% endfor %}</tools>"
    "{% endif %}"
    "{% for m in messages %}<|{{ m.role }}|>{% if m.name %}({{ m.name }}){% endif %}"
    "{{ m.content }}"
    "{% for call in m.tool_calls or [] %}<call>{{ call.function.name }} "
    "{{ call.function.arguments }}</call>{% endfor %}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer made here: no download, a template that renders tool calls."""
    model = models.WordLevel({"[UNK]": 0, "<eos>": 1}, unk_token="[UNK]")
    backend = Tokenizer(model)
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", eos_token="<eos>", chat_template=CHAT_TEMPLATE
    )


def second_assistant_step(trajectory: Trajectory) -> int:
    return list(trajectory.steps.filter(role="assistant").values_list("index", flat=True))[1]


@pytest.fixture
def real(project: Project, shared_data: Path) -> Project:
    """Both samples in one project, with judged critical steps and corrections for some
    failures, and a few generated runs that carry tool schemas (the samples have none)."""
    for path in ("tau-bench/gpt-4o-airline.json", "who-and-when/algorithm-generated"):
        code, summary = run_import(shared_data / path, project=project.slug)
        assert code == 0, summary["errors"]
    generated = load_runs(project, [record(n, f"gen-{n % 2}", n % 2 == 0) for n in range(4)])
    for failure in generated[1::2]:
        judge(failure, "failure", 4)
        correct(failure, 4, [{"role": "assistant", "content": "Looked it up: fine."}])
    runs = Trajectory.objects.filter(project=project, effective_label__verdict="failure")
    for failure in list(runs.filter(source_format="tau_bench"))[:12]:
        step = second_assistant_step(failure)
        judge(failure, "failure", step, error_category="wrong_arguments")
        tool = next((s.tool_calls[0]["name"] for s in failure.steps.all() if s.tool_calls), "think")
        call = {"id": "fix-1", "name": tool, "arguments": {"user_id": "x"}}
        correct(
            failure,
            step,
            [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "fix-1", "name": tool, "content": "{}"},
                {"role": "assistant", "content": "All done, anything else?"},
            ],
            accepted=failure.pk % 3 != 0,
        )
    for failure in list(runs.filter(source_format="who_and_when"))[:40]:
        critical = failure.effective_label.first_critical_step
        step = failure.steps.get(index=critical)
        if critical and step.role == "assistant":
            new = {"role": "assistant", "name": step.name, "content": "Let me verify it first."}
            correct(failure, critical, [new])
    return project


def load(done: DatasetExport, cache: Path) -> datasets.DatasetDict:
    files = {split: str(path) for split, path in data_files(done).items()}
    loader = "json" if done.format == "jsonl" else "parquet"
    return datasets.load_dataset(loader, data_files=files, cache_dir=str(cache))


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_every_kind_loads_and_renders_through_trl(real, kind, tokenizer, tmp_path):
    builder = BUILDERS[kind]
    jsonl = export(real, kind, "jsonl", test_fraction=0.5)
    parquet = export(real, kind, "parquet", test_fraction=0.5)
    loaded = {fmt: load(done, tmp_path / fmt) for fmt, done in (("j", jsonl), ("p", parquet))}

    assert set(loaded["j"]) == {"train", "test"}
    for split in ("train", "test"):
        assert loaded["j"][split].num_rows == jsonl.counts[split] > 0
        assert loaded["j"][split].to_list() == loaded["p"][split].to_list()
        assert set(loaded["p"][split].column_names) == set(builder.columns)

    rows = loaded["j"]["train"].to_list() + loaded["j"]["test"].to_list()
    ids = {r.get("trajectory_id") or r["rejected_trajectory_id"] for r in rows}
    made_from = Trajectory.objects.filter(pk__in=ids).values_list(
        "source_format", "parent__source_format"
    )
    assert {parent or own for own, parent in made_from} >= {"tau_bench", "who_and_when"}

    rendered = []
    for row in rows:
        assert is_conversational(row) is builder.conversational
        tools = json.loads(row["tools"]) if row.get("tools") else None
        out = maybe_apply_chat_template(row, tokenizer, tools=tools)
        if builder.conversational:
            rendered.append("".join(v for v in out.values() if isinstance(v, str)))
        else:
            assert out is row  # standard format: TRL passes it through unchanged
    if builder.conversational:
        assert all(rendered)
        assert any("<tools>" in text for text in rendered)  # tool schemas render
        assert any("<call>" in text for text in rendered)  # and so do tool calls
