"""The main pages run under the strict Content-Security-Policy: nothing they need is inline,
so the browser reports no violation and no script error on any of them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from annotate.models import Queue, QueueItem
from curation.formats.reading import RawItem
from curation.ingest import import_items
from curation.models import Membership, Project, Trajectory
from tests.e2e.conftest import log_in

# Collects what the page's own `securitypolicyviolation` events say; Playwright's init
# scripts are not subject to the page's CSP.
LISTEN = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}`);
});
"""


def records(count: int) -> list[RawItem]:
    return [
        RawItem(
            "test",
            f"item {n}",
            {
                "id": f"r{n}",
                "task": {"id": f"t{n}", "instruction": "Add two numbers."},
                "steps": [
                    {"role": "user", "content": "What is 2 + 2?"},
                    {"role": "assistant", "content": "**4**, with `code` and a [link](/x)."},
                ],
            },
        )
        for n in range(count)
    ]


@pytest.mark.django_db(transaction=True)
def test_the_main_pages_pass_the_policy(page, live_server) -> None:
    project = Project.objects.create(slug="csp", name="CSP")
    user = User.objects.create_user("ada", password="pw")
    Membership.objects.create(project=project, user=user, role=Membership.Role.ADMIN)
    import_items(project, records(3))
    trajectory = Trajectory.objects.order_by("pk").first()
    queue = Queue.objects.create(project=project, name="first pass")
    QueueItem.objects.create(queue=queue, trajectory=trajectory, position=0)

    problems: list[str] = []
    page.page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.page.on(
        "console",
        lambda message: (
            problems.append(f"console: {message.text}")
            if "Content Security Policy" in message.text
            else None
        ),
    )
    page.page.add_init_script(LISTEN)

    paths = [
        "/",
        f"/p/{project.slug}/",
        f"/t/{trajectory.pk}/",
        f"/p/{project.slug}/queues/",
        f"/q/{queue.pk}/",
        f"/p/{project.slug}/judges/",
        f"/p/{project.slug}/judges/heuristic/",
        f"/p/{project.slug}/judges/evaluate/",
        f"/p/{project.slug}/corrections/",
        f"/p/{project.slug}/critic/",
        f"/p/{project.slug}/agreement/",
        f"/p/{project.slug}/review/",
        f"/p/{project.slug}/import/",
        f"/p/{project.slug}/settings/",
    ]
    page.page.goto(f"{live_server.url}/accounts/login/")
    seen = {"/accounts/login/": page.page.evaluate("window.__violations")}
    log_in(page.page, live_server, "ada", "pw")
    for path in paths:
        response = page.page.goto(f"{live_server.url}{path}")
        assert response is not None and response.status == 200, path
        assert "default-src 'self'" in response.headers["content-security-policy"]
        page.page.wait_for_load_state("networkidle")
        seen[path] = page.page.evaluate("window.__violations")

    violations = {path: found for path, found in seen.items() if found}
    assert not violations, violations
    assert not problems, problems
    assert page.dialogs == [] and page.outside == []
