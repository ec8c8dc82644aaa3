"""python manage.py export_dataset --project SLUG --kind KIND --out DIR [--format jsonl|parquet]
[filters...] [--json]"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from curation.canonical import AGENT_ROLES, VERDICTS
from curation.exports.runner import check_request, create_export, run_export
from curation.exports.spec import FORMATS, KINDS, MIN_SOURCES, PAIRS, FilterError
from curation.models import DatasetExport, Project

# option: (spec field, argparse settings); list options repeat or take commas.
FILTER_OPTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "--task": ("tasks", {"action": "append", "help": "task id (repeat for more)"}),
    "--agent-model": ("agent_models", {"action": "append"}),
    "--agent-role": ("agent_roles", {"action": "append", "choices": AGENT_ROLES}),
    "--verdict": ("verdicts", {"action": "append", "choices": VERDICTS}),
    "--min-source": ("min_source", {"choices": MIN_SOURCES}),
    "--require-agreement": ("require_agreement", {"action": "store_true", "default": None}),
    "--category": ("categories", {"action": "append"}),
    "--step-score-min": ("step_score_min", {"type": float}),
    "--step-score-max": ("step_score_max", {"type": float}),
    "--min-steps": ("min_steps", {"type": int}),
    "--max-steps": ("max_steps", {"type": int}),
    "--min-length": ("min_length", {"type": int}),
    "--max-length": ("max_length", {"type": int}),
    "--tokenizer": ("tokenizer", {"help": "local tokenizer for lengths (else characters)"}),
    "--no-dedup": ("dedup", {"action": "store_false", "default": None}),
    "--test-fraction": ("test_fraction", {"type": float, "help": "default 0.1"}),
    "--split-seed": ("split_seed", {}),
    "--limit": ("limit", {"type": int, "help": "at most this many rows"}),
    "--loss-after-branch": ("loss_after_branch", {"action": "store_true", "default": None}),
    "--pairs": ("pairs", {"help": f"preference pairs: {','.join(PAIRS)} (default both)"}),
    "--step-threshold": ("step_threshold", {"type": float, "help": "default 0.5"}),
}


class Command(BaseCommand):
    help = (
        "Export a curated dataset of a project (sft, preference, unpaired, stepwise or "
        "rl_prefix) into DIR: data files per split, manifest.json and a README.md card. "
        "Each run is also kept as a new version of the export in the studio."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--kind", required=True, choices=KINDS)
        parser.add_argument("--out", required=True, type=Path, help="folder for the files")
        parser.add_argument("--format", choices=FORMATS, default="jsonl")
        parser.add_argument("--json", action="store_true", help="print the manifest as JSON")
        for option, (field, settings) in FILTER_OPTIONS.items():
            parser.add_argument(option, dest=field, **settings)

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        data = {field: options[field] for field, _ in FILTER_OPTIONS.values()}
        try:
            spec = check_request(project, options["kind"], options["format"], data)
        except FilterError as exc:
            raise CommandError(f"bad filter {exc}") from exc
        out = Path(options["out"])
        out.mkdir(parents=True, exist_ok=True)
        export = run_export(create_export(project, spec, options["format"], None).pk, out=out)
        if export.status != DatasetExport.Status.DONE:
            raise CommandError(f"export {export.pk} failed: {export.error}")
        if options["json"]:
            self.stdout.write(json.dumps(export.manifest, sort_keys=True))
            return
        counts = export.counts
        changed = {None: "first version", True: "content changed", False: "content unchanged"}
        self.stdout.write(
            self.style.SUCCESS(
                f"Exported {counts['rows']} {export.kind} rows ({counts['train']} train, "
                f"{counts['test']} test; {counts['duplicates']} duplicates removed) from "
                f"{counts['runs_read']} runs into {out}: version {export.version}, "
                f"{changed[export.changed]}."
            )
        )
