"""Helpers shared by the import tests."""

from __future__ import annotations

import io
import json
from pathlib import Path

from django.core.management import call_command

# The hand-crafted half of Who&When is not in ../shared/data: a sample of its shape.
WHO_AND_WHEN_HAND_CRAFTED = {
    "is_correct": False,
    "question": "What is the capital of the country with the tallest tower?",
    "question_ID": "hc-1",
    "level": 1,
    "ground_truth": "Dubai",
    "history": [
        {"content": "What is the capital ...?", "role": "human"},
        {"content": "Plan: search the web.", "role": "Orchestrator (thought)"},
        {"content": "Search for tallest tower", "role": "Orchestrator (-> WebSurfer)"},
        {"content": "I typed 'tallest tower'.", "role": "WebSurfer"},
        {"content": "FINAL ANSWER: Riyadh", "role": "Orchestrator (final answer)"},
    ],
    "mistake_agent": "WebSurfer",
    "mistake_step": "3",
    "mistake_reason": "It read the wrong search result.",
}


def run_import(*paths: Path | str, **options) -> tuple[int, dict]:
    """Run `import_trajectories --json`; its exit code and its summary."""
    out = io.StringIO()
    code = 0
    try:
        call_command(
            "import_trajectories",
            *[str(p) for p in paths],
            project=options.pop("project", "demo"),
            json=True,
            stdout=out,
            stderr=io.StringIO(),
            **options,
        )
    except SystemExit as exc:
        code = exc.code
    return code, json.loads(out.getvalue())


def write_runs(path: Path, runs: int) -> bytes:
    """JSON Lines of `runs` canonical runs of 21 steps (about 5 kB each), for the tests that
    kill an import part way; the file's bytes."""
    with path.open("w") as out:
        for n in range(runs):
            steps = [{"role": "user", "content": f"question {n}"}] + [
                {"role": "assistant", "content": f"answer {n}.{i} " + "x" * 200} for i in range(20)
            ]
            out.write(
                json.dumps({"id": f"run-{n}", "task": {"id": f"t{n % 50}"}, "steps": steps}) + "\n"
            )
    return path.read_bytes()
