"""Helpers shared by the annotation workspace tests."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from curation.models import Membership, Project


def make_member(project: Project, name: str, role: str = Membership.Role.ANNOTATOR) -> User:
    user = User.objects.create_user(name)  # no password: hashing is slow, tests log in by force
    Membership.objects.create(project=project, user=user, role=role)
    return user


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client
