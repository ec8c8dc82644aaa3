"""Finding a judge config by name for the commands: names are unique per project."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError
from django.http import QueryDict

from annotate.views.lists import filter_form
from curation.models import Project
from workers.models import JudgeConfig


def find_config(name: str, project_slug: str | None) -> JudgeConfig:
    configs = JudgeConfig.objects.select_related("project").filter(name=name)
    if project_slug:
        configs = configs.filter(project__slug=project_slug)
    found = list(configs[:2])
    if not found:
        where = f" in project '{project_slug}'" if project_slug else ""
        raise CommandError(f"no judge config '{name}'{where}")
    if len(found) > 1:
        projects = ", ".join(sorted(c.project.slug for c in configs))
        raise CommandError(f"judge config '{name}' is in projects {projects}: add --project")
    return found[0]


def list_filters(project: Project, pairs: list[str]) -> dict[str, Any]:
    """`--filter KEY=VALUE` options as the trajectory list's filters, or CommandError."""
    data = QueryDict(mutable=True)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise CommandError(f"--filter {pair!r}: expected KEY=VALUE")
        data[key] = value
    form = filter_form(data, project)
    filters = form.filters()
    if form.errors:
        problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
        raise CommandError(f"bad filter: {problems}")
    return filters
