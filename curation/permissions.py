"""Who may see and change what, per project. Every view and API endpoint goes through here."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from curation.models import Membership, Project

IMPORT_ROLES = {Membership.Role.ADMIN, Membership.Role.RESEARCHER}
REVIEW_ROLES = {Membership.Role.ADMIN, Membership.Role.REVIEWER}
MANAGE_ROLES = IMPORT_ROLES  # create queues, edit the taxonomy and label fields


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


def can_review(user: AbstractBaseUser | AnonymousUser, project: Project) -> bool:
    """Adjudicate disagreements: reviewers and admins."""
    return role_in(user, project) in REVIEW_ROLES


def can_manage(user: AbstractBaseUser | AnonymousUser, project: Project) -> bool:
    """Create queues and edit the project's taxonomy and label fields: researchers and admins."""
    return role_in(user, project) in MANAGE_ROLES
