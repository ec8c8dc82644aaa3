"""Make sure a local user can log in and print how (for `make run` on one machine)."""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the local admin user if no user exists yet, and print the login."

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model().objects
        username = os.environ.get("LOCAL_ADMIN_USER", "admin")
        password = os.environ.get("LOCAL_ADMIN_PASSWORD", "admin")
        if not users.exists():
            users.create_superuser(username, f"{username}@localhost", password)
            self.stdout.write(f"Log in as {username} / {password} (created just now).")
        elif users.filter(username=username).exists():
            self.stdout.write(f"Log in as {username} (password as set when it was created).")
        else:
            self.stdout.write("Log in with one of this database's existing users.")
