"""Server time and query count of the review page of a 300-step trajectory (DESIGN.md section 9).

    DATABASE_URL=postgres://... python bench/review_page.py [--steps 300] [--requests 200]

Needs a migrated database. It creates its own project (a 300-step tool-use trajectory with gold,
human, judge and heuristic annotations and two per-step score strips) and a superuser, renders
/t/<id>/ through django.test.Client in this process (middleware, session, view, templates: all
the server does but the socket), prints p50/p95/p99 and the SQL query count, then deletes what
it created. Target: p95 well under 100 ms and a query count that does not grow with steps.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 100


def build(steps: int):
    """A project with one labelled, scored trajectory of `steps` steps, and a superuser."""
    from django.contrib.auth.models import User

    from annotate import effective
    from annotate.models import Annotation, StepScore
    from curation.models import Project, Step, Task, Trajectory

    tag = uuid.uuid4().hex[:12]
    project = Project.objects.create(slug=f"bench-review-{tag}", name="Review page bench")
    user = User.objects.create_superuser(f"bench-{tag}", password=None)
    task = Task.objects.create(project=project, external_id="t", instruction="Book a flight.")
    trajectory = Trajectory.objects.create(
        project=project,
        task=task,
        source_format="bench",
        content_hash=tag,
        step_count=steps,
        success=False,
        reward=0.0,
    )
    Step.objects.bulk_create(step(trajectory, i) for i in range(steps))
    middle = steps // 2
    Annotation.objects.bulk_create(
        [
            Annotation(
                trajectory=trajectory,
                source="gold",
                source_name="dataset",
                verdict="failure",
                first_critical_step=middle,
                root_cause_step=middle - 4,
                error_category="wrong_plan",
                rationale="Booked the wrong flight.",
            ),
            Annotation(
                trajectory=trajectory,
                source="human",
                author=user,
                verdict="failure",
                first_critical_step=middle + 2,
                root_cause_step=middle - 4,
            ),
            Annotation(
                trajectory=trajectory,
                source="judge",
                source_name="judge-a",
                verdict="failure",
                first_critical_step=middle,
                confidence=0.8,
            ),
            Annotation(
                trajectory=trajectory,
                source="heuristic",
                source_name="loops",
                verdict="failure",
                first_critical_step=steps - 3,
            ),
        ]
    )
    labels = [label for label, _ in StepScore.Label.choices]
    StepScore.objects.bulk_create(
        [
            StepScore(trajectory=trajectory, step_index=i, source="judge", label=labels[i % 5])
            for i in range(steps)
        ]
        + [
            StepScore(
                trajectory=trajectory,
                step_index=i,
                source="reward_model",
                source_name="prm",
                score=(i % 10) / 10,
            )
            for i in range(steps)
        ]
    )
    effective.refresh([trajectory.pk])
    return project, user, trajectory


def step(trajectory, index: int):
    """Steps cycling through user, assistant with markdown and a tool call, and tool results."""
    from curation.models import Step

    kind = index % 3
    if kind == 0:
        return Step(trajectory=trajectory, index=index, role="user", content=f"Turn {index}: ok?")
    if kind == 1:
        return Step(
            trajectory=trajectory,
            index=index,
            role="assistant",
            name="Planner",
            content=f"## Step {index}\nI will **check** `flights`:\n- one\n- [two](https://x.io)",
            reasoning="Think first. " * 10,
            tool_calls=[{"id": f"c{index}", "name": "search", "arguments": {"q": "SFO", "n": 3}}],
        )
    return Step(
        trajectory=trajectory,
        index=index,
        role="tool",
        name="search",
        tool_call_id=f"c{index - 1}",
        content='{"flights": [' + ", ".join(f'"UA-{n}"' for n in range(index * 3)) + "]}",
    )


def recording(queries: list[str]):
    """A database execute wrapper that notes each statement (CaptureQueriesContext loses them:
    a request start clears the connection's query log)."""

    def wrapper(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    return wrapper


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.db import connection
    from django.test import Client

    project, user, trajectory = build(args.steps)
    try:
        client = Client()
        client.force_login(user)
        url = f"/t/{trajectory.pk}/"
        queries: list[str] = []
        with connection.execute_wrapper(recording(queries)):
            response = client.get(url)
        assert response.status_code == 200, response.status_code
        for _ in range(10):  # warm-up
            client.get(url)
        times = []
        for _ in range(args.requests):
            start = time.perf_counter()
            client.get(url)
            times.append((time.perf_counter() - start) * 1000)
        p50, p95, p99 = (percentile(times, q) for q in (50, 95, 99))
        print(
            f"review page, {args.steps} steps, {args.requests} requests on "
            f"{connection.vendor}: p50 {p50:.1f} ms  p95 {p95:.1f} ms  p99 {p99:.1f} ms  "
            f"({len(queries)} queries, {len(response.content) // 1024} KiB)"
        )
        print(f"target p95 < {TARGET_MS} ms: {'met' if p95 < TARGET_MS else 'MISSED'}")
    finally:
        project.delete()
        user.delete()


if __name__ == "__main__":
    main()
