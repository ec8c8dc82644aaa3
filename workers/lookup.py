"""Finding a judge config by name for the commands: names are unique per project."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from annotate.views.lists import filters_from_pairs
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
    try:
        return filters_from_pairs(project, pairs)
    except ValueError as error:
        raise CommandError(str(error)) from None
