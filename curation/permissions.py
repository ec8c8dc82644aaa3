"""Who may see and change what, per project. Every view and API endpoint goes through here."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from curation.models import Membership, Project

IMPORT_ROLES = {Membership.Role.ADMIN, Membership.Role.RESEARCHER}


def visible_projects(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Project]:
    if not user.is_authenticated:
        return Project.objects.none()
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user)


def role_in(user: AbstractBaseUser | AnonymousUser, project: Project) -> str | None:
    if not user.is_authenticated:
        return None
    if user.is_superuser:
        return Membership.Role.ADMIN
    membership = Membership.objects.filter(project=project, user=user).first()
    return membership.role if membership else None


def can_import(user: AbstractBaseUser | AnonymousUser, project: Project) -> bool:
    return role_in(user, project) in IMPORT_ROLES
