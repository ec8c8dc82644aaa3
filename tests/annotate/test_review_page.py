"""The review page: markdown, tool results, every judgement side by side, step scores, and a
fixed number of queries; plus the strict markdown renderer it uses for untrusted text."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotate import effective
from annotate.markdown import render_markdown
from annotate.models import Adjudication, Annotation, StepScore
from annotate.views.review import TOOL_FOLD_CHARS
from curation.models import Membership, Project, Trajectory
from tests.annotate.helpers import make_trajectory

# --- markdown renderer ----------------------------------------------------------------------

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg/onload=alert(1)>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x]( javascript:alert(1))",
    "[x](java\tscript:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](&#x6A;avascript:alert(1))",
    "[x](data:text/html;base64,PHNjcmlwdD4=)",
    "[x](vbscript:msgbox(1))",
    "[x](//evil.example/x)",
    "[x](/\\evil.example)",
    '[x](https://ok.example/" onmouseover="alert(1))',
    "[x](https://ok.example/' onmouseover='alert(1))",
    "[x](https://ok.example/><script>alert(1)</script>)",
    "**<b onclick=alert(1)>bold</b>**",
    "`<script>alert(1)</script>`",
    "```\n<script>alert(1)</script>\n```",
    "# <img src=x onerror=alert(1)>",
    "- <a href='javascript:alert(1)'>x</a>",
    "[<img src=x onerror=alert(1)>](https://ok.example/)",
    "\x00<script>\x00",
]


def tags(html: str) -> set[str]:
    return set(re.findall(r"<([a-zA-Z0-9]+)", html))


def hrefs(html: str) -> list[str]:
    return re.findall(r'href="([^"]*)"', html)


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_never_lets_markup_or_scripts_through(text):
    html = render_markdown(text)
    assert tags(html) <= {"p", "br", "strong", "em", "code", "pre", "h3", "h4", "h5", "ul"} | {
        "ol",
        "li",
        "a",
    }
    assert not re.search(r"<(script|img|svg|b )", html, re.IGNORECASE)
    assert not re.search(r"\son[a-z]+\s*=", re.sub(r"&[a-z#0-9]+;", "", _outside_text(html)))
    for href in hrefs(html):
        assert re.match(r"https?://", href, re.IGNORECASE)
        assert not re.search(r'[\s"\'<>]', href)


def _outside_text(html: str) -> str:
    """Only the tags of `html` (attributes included), without the text between them."""
    return "".join(re.findall(r"<[^>]*>", html))


@pytest.mark.parametrize(
    "text",
    [
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](&#106;avascript:alert(1))",
        "[x](data:text/html,hi)",
        "[x](vbscript:x)",
        "[x](//evil.example)",
    ],
)
def test_markdown_shows_links_with_other_schemes_as_text(text):
    html = render_markdown(text)
    assert "<a " not in html
    assert "[x](" in html


def test_markdown_keeps_quotes_inside_the_href():
    html = render_markdown('[x](https://ok.example/" onclick="alert(1))')
    assert "<a " not in html  # a quote ends the URL, so it is no link at all
    assert "&quot; onclick=&quot;" in html


def test_markdown_renders_safe_links_with_rel():
    html = render_markdown("see [the docs](https://example.com/a?b=1&c=2) now")
    assert (
        '<a href="https://example.com/a?b=1&amp;c=2" rel="noopener noreferrer nofollow"'
        ' target="_blank">the docs</a>'
    ) in html


def test_markdown_renders_the_subset():
    text = (
        "# Title\n## Sub\n### Small\n#### not a heading\n\n"
        "Some **bold**, *italic* and `co*de*`.\nNext line.\n\n"
        "- one\n- two\n\n3. three\n4. four\n\n"
        "```python\nx = 1 < 2\n```"
    )
    html = render_markdown(text)
    assert "<h3>Title</h3>" in html and "<h4>Sub</h4>" in html and "<h5>Small</h5>" in html
    assert "<p>#### not a heading</p>" in html
    assert "<strong>bold</strong>" in html and "<em>italic</em>" in html
    assert "<code>co*de*</code>" in html
    assert "<br>Next line." in html
    assert "<ul><li>one</li><li>two</li></ul>" in html
    assert '<ol start="3"><li>three</li><li>four</li></ol>' in html
    assert "<pre><code>x = 1 &lt; 2</code></pre>" in html


def test_markdown_escapes_entities_so_they_show_as_written():
    assert str(render_markdown("&#106; &amp; &lt;b&gt;")) == (
        "<p>&amp;#106; &amp;amp; &amp;lt;b&amp;gt;</p>"
    )


def test_markdown_leaves_an_unclosed_fence_as_code_to_the_end():
    assert str(render_markdown("```\n<b>\nmore")) == "<pre><code>&lt;b&gt;\nmore</code></pre>"


# --- the page -------------------------------------------------------------------------------


def annotate(trajectory: Trajectory, source: str, name: str, **fields) -> Annotation:
    annotation = Annotation.objects.create(
        trajectory=trajectory, source=source, source_name=name, **fields
    )
    effective.refresh([trajectory.pk])
    return annotation


def user_steps(count: int) -> list[dict]:
    return [{"role": "user", "content": f"step {i}"} for i in range(count)]


@pytest.fixture
def browser(client: Client, project: Project, django_user_model) -> Client:
    user = django_user_model.objects.create_user("alice", password="pw")
    Membership.objects.create(project=project, user=user, role=Membership.Role.ANNOTATOR)
    client.force_login(user)
    return client


def page(browser: Client, trajectory: Trajectory) -> str:
    response = browser.get(f"/t/{trajectory.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def step_html(html: str, index: int) -> str:
    start = html.index(f'id="step-{index}"')
    return html[start : html.index("</li>", start)]


def test_it_renders_markdown_in_user_and_assistant_content_only(browser, project):
    steps = [
        {"role": "user", "content": "Please **hurry**"},
        {"role": "assistant", "content": "# Plan\n- [docs](https://example.com)"},
        {"role": "tool", "content": "**not markdown**"},
        {"role": "system", "content": "*plain*"},
    ]
    html = page(browser, make_trajectory(project, steps))
    assert "<strong>hurry</strong>" in step_html(html, 0)
    assert '<h3>Plan</h3>\n<ul><li><a href="https://example.com"' in step_html(html, 1)
    assert "**not markdown**" in step_html(html, 2)
    assert "*plain*" in step_html(html, 3)


def test_it_keeps_hostile_markdown_inert(browser, project):
    steps = [{"role": "assistant", "content": t} for t in HOSTILE if "\x00" not in t]  # not in PG
    html = page(browser, make_trajectory(project, steps))
    assert "<script>alert" not in html and "<img src=x" not in html and "<svg" not in html
    assert 'href="javascript' not in html.lower() and 'href="data:' not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_it_collapses_long_tool_results_and_opens_short_ones(browser, project):
    steps = [
        {"role": "tool", "name": "lookup", "content": "short result"},
        {"role": "tool", "name": "lookup", "content": "z" * (TOOL_FOLD_CHARS + 1)},
    ]
    html = page(browser, make_trajectory(project, steps))
    assert '<details class="tool-result" open>' in step_html(html, 0)
    assert '<details class="tool-result">' in step_html(html, 1)
    assert f"{TOOL_FOLD_CHARS + 1} characters" in step_html(html, 1)


def test_it_shows_each_steps_index_role_and_agent_name(browser, project):
    steps = [{"role": "assistant", "name": "Orchestrator", "content": "hi"}]
    html = page(browser, make_trajectory(project, steps))
    assert 'class="step role-assistant" data-step="0"' in html
    assert '<strong class="name">Orchestrator</strong>' in step_html(html, 0)


def test_it_marks_every_annotations_steps_side_by_side(browser, project, django_user_model):
    trajectory = make_trajectory(project, user_steps(6))
    annotate(trajectory, "gold", "who-and-when", verdict="failure", first_critical_step=3)
    annotate(
        trajectory,
        "judge",
        "gpt-judge",
        verdict="failure",
        first_critical_step=3,
        root_cause_step=1,
        error_category="wrong_plan",
    )
    bob = django_user_model.objects.create_user("bob")
    Annotation.objects.create(
        trajectory=trajectory,
        source="human",
        author=bob,
        verdict="failure",
        first_critical_step=4,
        root_cause_step=3,
    )
    annotate(trajectory, "heuristic", "loops", verdict="failure", status="draft")
    html = page(browser, trajectory)
    step3 = step_html(html, 3)
    assert "⚑ critical: gold" in step3 and "⚑ critical: gpt-judge" in step3
    assert "◆ root: bob" in step3
    assert "◆ root: gpt-judge" in step_html(html, 1)
    assert "⚑ critical: bob" in step_html(html, 4)
    assert "⚑" not in step_html(html, 0) and "loops" not in html  # drafts are not shown
    cards = re.findall(r'class="card judgement source-(\w+)"', html)
    assert cards == ["gold", "human", "judge"]


def test_it_shows_the_effective_label_with_the_source_of_each_field(browser, project):
    trajectory = make_trajectory(project, user_steps(5), success=False)
    annotate(
        trajectory,
        "judge",
        "gpt-judge",
        verdict="success",
        first_critical_step=2,
        error_category="wrong_tool",
    )
    html = page(browser, trajectory)
    start = html.index('id="effective-label"')
    card = html[start : html.index("</section>", start)]
    assert 'failure <span class="muted source">verified outcome</span>' in card
    assert 'step 2</a> <span class="muted source">judge</span>' in card
    assert 'wrong_tool <span class="muted source">judge</span>' in card
    assert 'class="step role-user critical" data-step="2"' in html


def test_it_shows_the_adjudication_as_a_card(browser, project, django_user_model):
    trajectory = make_trajectory(project, user_steps(3))
    reviewer = django_user_model.objects.create_user("rita")
    Adjudication.objects.create(
        trajectory=trajectory, reviewer=reviewer, verdict="failure", first_critical_step=1
    )
    effective.refresh([trajectory.pk])
    html = page(browser, trajectory)
    assert 'id="adjudication"' in html and "rita" in html
    assert "⚑ critical: adjudicated" in step_html(html, 1)


def test_it_escapes_hostile_annotation_authors_and_rationales(browser, project):
    trajectory = make_trajectory(project, user_steps(3))
    evil = "<img src=x onerror=alert(1)>"
    annotate(trajectory, "judge", evil, verdict="failure", first_critical_step=1, rationale=evil)
    html = page(browser, trajectory)
    assert evil not in html
    assert "⚑ critical: &lt;img src=x onerror=alert(1)&gt;" in html


def test_it_shows_no_score_strip_without_scores(browser, project):
    html = page(browser, make_trajectory(project, user_steps(3)))
    assert "score-strip" not in html


def test_it_shows_a_score_strip_per_scorer_linking_to_steps(browser, project):
    trajectory = make_trajectory(project, user_steps(4))
    for index, label in ((0, "progress"), (2, "error")):
        StepScore.objects.create(
            trajectory=trajectory, step_index=index, source="judge", label=label
        )
    for index, score in ((0, 0.05), (1, 0.5), (3, 0.99)):
        StepScore.objects.create(
            trajectory=trajectory,
            step_index=index,
            source="reward_model",
            source_name="prm",
            score=score,
        )
    html = page(browser, trajectory)
    strips = re.findall(r'<div class="score-strip"><span class="scorer">(\w+)</span>', html)
    assert strips == ["judge", "prm"]
    judge, prm = html.split('<div class="score-strip">')[1:3]
    assert re.findall(r'class="cell(?: ([\w-]+))?" href="#step-(\d)"', judge) == [
        ("label-progress", "0"),
        ("", "1"),
        ("label-error", "2"),
        ("", "3"),
    ]
    assert re.findall(r'class="cell(?: ([\w-]+))?"', prm) == ["score-0", "score-2", "", "score-4"]
    assert 'title="step 3 0.99"' in prm


def test_it_scales_scores_outside_zero_to_one(browser, project):
    trajectory = make_trajectory(project, user_steps(2))
    for index, score in ((0, -3.0), (1, 5.0)):
        StepScore.objects.create(
            trajectory=trajectory, step_index=index, source="reward_model", score=score
        )
    html = page(browser, trajectory)
    assert re.findall(r'class="cell(?: ([\w-]+))?"', html) == ["score-0", "score-4"]


def labelled(project: Project, steps: int, annotations: int) -> Trajectory:
    trajectory = make_trajectory(
        project,
        [
            {
                "role": "assistant" if i % 2 else "tool",
                "content": f"**step** {i}",
                "tool_calls": [{"id": f"c{i}", "name": "look", "arguments": {"i": i}}],
            }
            for i in range(steps)
        ],
    )
    for n in range(annotations):
        annotate(trajectory, "judge", f"judge-{n}", verdict="failure", first_critical_step=n)
    StepScore.objects.bulk_create(
        StepScore(trajectory=trajectory, step_index=i, source="judge", score=0.5)
        for i in range(steps)
    )
    return trajectory


def count_queries(browser: Client, trajectory: Trajectory) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert browser.get(f"/t/{trajectory.pk}/").status_code == 200
    return len(queries)


def test_review_page_queries_do_not_grow_with_steps_annotations_or_scores(browser, project):
    small = count_queries(browser, labelled(project, steps=5, annotations=1))
    large = count_queries(browser, labelled(project, steps=300, annotations=5))
    assert small == large
    assert small <= 10  # 6 of the page's own, the rest the annotation form's
