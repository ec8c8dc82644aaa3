"""Who may export: the project's researchers and admins (annotators and reviewers may not)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from curation.models import Membership, Project
from curation.permissions import role_in

EXPORT_ROLES = {Membership.Role.ADMIN, Membership.Role.RESEARCHER}


def can_export(user: AbstractBaseUser | AnonymousUser, project: Project) -> bool:
    return role_in(user, project) in EXPORT_ROLES
