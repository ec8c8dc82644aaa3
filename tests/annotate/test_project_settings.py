"""Project settings: researchers and admins edit the error taxonomy and the extra label fields."""

from __future__ import annotations

import pytest
from django import forms
from django.contrib.auth.models import User
from django.test import Client

from annotate.forms_review import parse_schema, parse_taxonomy, schema_text, taxonomy_text
from curation.models import Membership, Project
from curation.taxonomy import default_error_taxonomy

URL = "/p/demo/settings/"
SCHEMA = (
    '{"name": "helpfulness", "type": "numeric", "min": 1, "max": 5}\n'
    '{"name": "tone", "type": "categorical", "choices": ["polite", "rude"], '
    '"description": "How the agent sounds."}\n'
    '{"name": "safe", "type": "boolean"}'
)


def logged_in(client: Client, project: Project, role: str) -> Client:
    user = User.objects.create_user(role)
    Membership.objects.create(project=project, user=user, role=role)
    client.force_login(user)
    return client


@pytest.fixture
def researcher(client: Client, project: Project) -> Client:
    return logged_in(client, project, Membership.Role.RESEARCHER)


def test_it_redirects_anonymous_users_to_login(client: Client, project: Project) -> None:
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={URL}"


def test_it_gives_404_to_users_without_membership(client: Client, project: Project) -> None:
    other = Project.objects.create(slug="other", name="Other")
    logged_in(client, other, Membership.Role.ADMIN)
    assert client.get(URL).status_code == 404
    assert client.post(URL, {"taxonomy": "x"}).status_code == 404


@pytest.mark.parametrize("role", [Membership.Role.ANNOTATOR, Membership.Role.REVIEWER])
def test_it_gives_403_to_members_who_do_not_manage(
    client: Client, project: Project, role: str
) -> None:
    logged_in(client, project, role)
    assert client.get(URL).status_code == 403
    assert client.post(URL, {"taxonomy": "x: y"}).status_code == 403
    project.refresh_from_db()
    assert project.error_taxonomy == default_error_taxonomy()


@pytest.mark.parametrize("role", [Membership.Role.RESEARCHER, Membership.Role.ADMIN])
def test_it_lets_researchers_and_admins_in(client: Client, project: Project, role: str) -> None:
    logged_in(client, project, role)
    assert client.get(URL).status_code == 200


def test_it_shows_the_default_taxonomy_one_category_a_line(
    researcher: Client, project: Project
) -> None:
    text = researcher.get(URL).context["form"]["taxonomy"].value()
    assert text.splitlines()[0].startswith("misunderstood_task: Acted on a wrong reading")
    assert len(text.splitlines()) == len(default_error_taxonomy())


def test_settings_round_trip(researcher: Client, project: Project) -> None:
    taxonomy = "wrong_tool: Called the wrong tool.\n\nloop-2: Looped.\nother"
    response = researcher.post(URL, {"taxonomy": taxonomy, "label_schema": SCHEMA})
    assert response.status_code == 302
    project.refresh_from_db()
    assert project.error_taxonomy == [
        {"name": "wrong_tool", "description": "Called the wrong tool."},
        {"name": "loop-2", "description": "Looped."},
        {"name": "other", "description": ""},
    ]
    assert project.categories == ["wrong_tool", "loop-2", "other"]
    assert [field["name"] for field in project.label_schema] == ["helpfulness", "tone", "safe"]
    assert project.label_schema[0] == {"name": "helpfulness", "type": "numeric", "min": 1, "max": 5}
    form = researcher.get(URL).context["form"]
    assert form["taxonomy"].value() == "wrong_tool: Called the wrong tool.\nloop-2: Looped.\nother"
    assert form["label_schema"].value() == SCHEMA
    again = researcher.post(
        URL, {"taxonomy": form["taxonomy"].value(), "label_schema": form["label_schema"].value()}
    )
    assert again.status_code == 302
    project.refresh_from_db()
    assert project.categories == ["wrong_tool", "loop-2", "other"]


def test_an_empty_schema_clears_the_extra_fields(researcher: Client, project: Project) -> None:
    project.label_schema = [{"name": "safe", "type": "boolean"}]
    project.save()
    researcher.post(URL, {"taxonomy": "other", "label_schema": ""})
    project.refresh_from_db()
    assert project.label_schema == []


def test_it_shows_errors_and_saves_nothing(researcher: Client, project: Project) -> None:
    response = researcher.post(
        URL, {"taxonomy": "Wrong Tool: x\nok: y\nok: z", "label_schema": "{nope"}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Line 1: “Wrong Tool” is not a valid name" in html
    assert "Line 3: “ok” repeats line 2" in html
    assert "Line 1: not valid JSON" in html
    project.refresh_from_db()
    assert project.error_taxonomy == default_error_taxonomy()


def errors_of(parse, text: str) -> list[str]:
    with pytest.raises(forms.ValidationError) as caught:
        parse(text)
    return caught.value.messages


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Give at least one category."),
        ("  \n", "Give at least one category."),
        (": no name", "Line 1: “” is not a valid name"),
        ("_x: leading underscore", "Line 1: “_x” is not a valid name"),
        ("a" * 101, "is not a valid name"),
        ("a: one\nb: two\na: three", "Line 3: “a” repeats line 1."),
    ],
)
def test_it_rejects_a_bad_taxonomy(text: str, message: str) -> None:
    assert any(message in error for error in errors_of(parse_taxonomy, text))


def test_a_description_may_hold_colons() -> None:
    assert parse_taxonomy("x: see: here") == [{"name": "x", "description": "see: here"}]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("[1]", "expected a JSON object"),
        ('{"type": "boolean"}', "“name” must be a string"),
        ('{"name": "Bad Name", "type": "boolean"}', "“name” must be a string"),
        ('{"name": "x", "type": "text"}', "“type” must be one of numeric, categorical, boolean"),
        ('{"name": "x", "type": "numeric", "min": 5, "max": 1}', "“min” must be below “max”"),
        ('{"name": "x", "type": "numeric", "min": "1"}', "“min” must be a number"),
        ('{"name": "x", "type": "numeric", "max": true}', "“max” must be a number"),
        ('{"name": "x", "type": "categorical"}', "“choices” must be a non-empty list"),
        ('{"name": "x", "type": "categorical", "choices": []}', "“choices” must be a non-empty"),
        ('{"name": "x", "type": "categorical", "choices": ["a", "a"]}', "repeats a choice"),
        ('{"name": "x", "type": "boolean", "choices": ["a"]}', "a boolean field takes no choices"),
        ('{"name": "x", "type": "boolean", "description": 3}', "“description” must be a string"),
        ('{"name": "x", "type": "boolean"', "Line 1: not valid JSON"),
    ],
)
def test_it_rejects_a_bad_label_field(line: str, message: str) -> None:
    assert any(message in error for error in errors_of(parse_schema, line))


def test_it_rejects_a_repeated_label_field() -> None:
    text = '{"name": "x", "type": "boolean"}\n\n{"name": "x", "type": "boolean"}'
    assert errors_of(parse_schema, text) == ["Line 3: “x” repeats line 1."]


def test_the_text_forms_read_back_what_they_wrote() -> None:
    taxonomy = default_error_taxonomy()
    assert parse_taxonomy(taxonomy_text(taxonomy)) == taxonomy
    schema = parse_schema(SCHEMA)
    assert parse_schema(schema_text(schema)) == schema
