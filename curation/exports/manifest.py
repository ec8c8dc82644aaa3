"""What an export says about itself: counts gathered while writing, `manifest.json` (kind,
filter, counts, label sources, schema and code versions, sha256 of every file) and a
`README.md` dataset card. The card holds nothing that changes from one run to the next, so
an unchanged dataset keeps an identical card; the manifest also names the export and its time.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from curation.exports.base import Builder
from curation.exports.messages import dumps
from curation.exports.reading import Run
from curation.exports.schema import SCHEMA_VERSION
from curation.exports.spec import ExportSpec
from curation.exports.writing import DataFile
from curation.models import DatasetExport

PACKAGE = "trajectory-curation-studio"


@dataclass
class Stats:
    rows: Counter = field(default_factory=Counter)  # by split
    skipped: Counter = field(default_factory=Counter)  # by reason
    duplicates: int = 0
    runs_read: int = 0
    verdict_sources: Counter = field(default_factory=Counter)
    critical_step_sources: Counter = field(default_factory=Counter)
    categories: Counter = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.rows.values())

    def add(self, split: str, run: Run) -> None:
        self.rows[split] += 1
        self.verdict_sources[run.verdict_source or "none"] += 1
        if run.critical_step_source:
            self.critical_step_sources[run.critical_step_source] += 1
        if run.verdict != "success" and run.category:
            self.categories[run.category] += 1

    def counts(self) -> dict[str, Any]:
        return {
            "rows": self.total,
            "train": self.rows["train"],
            "test": self.rows["test"],
            "duplicates": self.duplicates,
            "skipped": dict(sorted(self.skipped.items())),
            "runs_read": self.runs_read,
        }


def code_version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "unknown"


def content_sha256(files: list[DataFile]) -> str:
    """The identity of the data: the names and hashes of the data files (not card, manifest)."""
    lines = "".join(f"{f.name} {f.sha256}\n" for f in sorted(files, key=lambda f: f.name))
    return hashlib.sha256(lines.encode()).hexdigest()


def manifest(
    export: DatasetExport,
    spec: ExportSpec,
    builder: Builder,
    stats: Stats,
    files: list[DataFile],
    card: dict[str, Any],
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "code_version": code_version(),
        "kind": export.kind,
        "format": export.format,
        "project": export.project.slug,
        "filter": spec.as_dict(),
        "export": {
            "id": export.pk,
            "version": export.version,
            "created_at": export.created_at.isoformat(),
            "created_by": export.created_by.get_username() if export.created_by else None,
        },
        "counts": stats.counts(),
        "label_sources": {
            "verdict": dict(sorted(stats.verdict_sources.items())),
            "first_critical_step": dict(sorted(stats.critical_step_sources.items())),
        },
        "error_categories": dict(sorted(stats.categories.items())),
        "columns": builder.columns,
        "files": [f.as_dict() for f in files] + [card],
        "content_sha256": content_sha256(files),
    }


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(head: tuple[str, str], rows: dict[str, Any], empty: str) -> list[str]:
    if not rows:
        return [empty, ""]
    lines = [f"| {head[0]} | {head[1]} |", "| --- | --- |"]
    lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in rows.items()]
    return [*lines, ""]


def _front_matter(kind: str, files: list[DataFile]) -> list[str]:
    lines = ["---"]
    if files:
        lines += ["configs:", "- config_name: default", "  data_files:"]
        for f in files:
            lines += [f"  - split: {f.split}", f"    path: {f.name}"]
    return [*lines, "tags:", "- trl", f"- {kind}", "---", ""]


def _bounds(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"from {low:g} to {high:g}"
    return f"at least {low:g}" if low is not None else f"at most {high:g}"


def _rules(spec: ExportSpec) -> list[str]:
    rules = [
        "- Runs whose effective verdict is " + " or ".join(spec.used_verdicts) + ".",
        "- Corrections only when accepted; correction guidance and all free-form run and step "
        "metadata are never exported.",
    ]
    if spec.min_source:
        rules.append(f"- Verdicts from the source `{spec.min_source}` or a better one.")
    if spec.require_agreement:
        rules.append("- No run whose people disagree, or whose judge disagrees with them.")
    for name in ("tasks", "agent_models", "agent_roles", "categories"):
        if values := getattr(spec, name):
            rules.append(f"- Only {name.replace('_', ' ')}: " + ", ".join(map(_cell, values)) + ".")
    if spec.step_score_min is not None or spec.step_score_max is not None:
        rules.append(f"- Every step score {_bounds(spec.step_score_min, spec.step_score_max)}.")
    if spec.min_steps is not None or spec.max_steps is not None:
        rules.append(f"- Runs of {_bounds(spec.min_steps, spec.max_steps)} steps.")
    if spec.min_length is not None or spec.max_length is not None:
        unit = f"tokens of `{spec.tokenizer}`" if spec.tokenizer else "characters"
        rules.append(f"- Training text {_bounds(spec.min_length, spec.max_length)} {unit}.")
    rules.append(
        f"- Split by task id: about {spec.test_fraction:.0%} of tasks in `test`, none on both "
        "sides."
    )
    if spec.dedup:
        rules.append("- Exact duplicates (same training columns) removed, the first one kept.")
    if spec.limit:
        rules.append(f"- At most {spec.limit} rows, the first ones in run order.")
    return rules


def dataset_card(
    project: str,
    format_name: str,
    spec: ExportSpec,
    builder: Builder,
    stats: Stats,
    files: list[DataFile],
) -> str:
    loader = "json" if format_name == "jsonl" else "parquet"
    data_files = ", ".join(f'"{f.split}": "{f.name}"' for f in files)
    lines = [
        *_front_matter(spec.kind, files),
        f"# {_cell(project)}: {spec.kind} dataset",
        "",
        builder.summary,
        "",
        "```python",
        "from datasets import load_dataset",
        f'dataset = load_dataset("{loader}", data_files={{{data_files}}})',
        "```",
        "",
        "## What was included and why",
        "",
        *_rules(spec),
        "",
        "Filter:",
        "",
        "```json",
        dumps(spec.as_dict()),
        "```",
        "",
        "## Counts",
        "",
        *_table(("split", "rows"), {f.split: f.rows for f in files}, "No rows."),
        f"Runs read: {stats.runs_read}. Duplicates removed: {stats.duplicates}.",
        "",
        *_table(("skipped because", "runs"), dict(sorted(stats.skipped.items())), ""),
        "## Label sources",
        "",
        *_table(("verdict source", "rows"), dict(sorted(stats.verdict_sources.items())), ""),
        *_table(
            ("critical step source", "rows"),
            dict(sorted(stats.critical_step_sources.items())),
            "",
        ),
        "## Error categories",
        "",
        *_table(("category", "rows"), dict(sorted(stats.categories.items())), "No failures."),
        "## Columns",
        "",
        *_table(("column", "meaning"), builder.columns, ""),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"
