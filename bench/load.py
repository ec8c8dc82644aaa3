"""Load test: annotators working one queue through gunicorn on PostgreSQL, checked afterwards.

    python bench/load.py [--annotators 50] [--seconds 60] [--trajectories 2000] [--overlap 2]
        [--workers 4] [--threads 1] [--database curation_load]

It makes its own database (`--database` on the PostgreSQL server of DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/: dropped, created again and migrated), imports the demo
airline runs (curation.demo: 10 to 32 steps, 20 on average, of messages, tool calls and JSON
results), makes the annotators (password login) and one queue of every run with the given
overlap. It starts gunicorn on a free loopback port and, from another process (this file with
--drive), runs one thread per annotator: log in, then until the time is up: open the next item
(the claim), read its review page, save a draft, submit. No think time: it measures what the
server carries.

It prints requests/s, p50/p95/p99 per kind and the errors, then checks the database: no item
was handed out more than `overlap` times (nor its claims counter drifted), nobody was handed an
item they had already submitted, every submission an annotator saw confirmed is a submitted
annotation with a done assignment, and there are no others. Exit status 1 when a check fails
or any request failed. tests/test_load.py runs the same on the test database, small.

The default server is 4 sync workers: on 2 cores it served as many requests/s as gthread
(2 x 4 or 4 x 2 threads) in interleaved runs, with about half their p95, and holds 4 database
connections. More sync workers only queue for the same cores.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import gunicorn

if TYPE_CHECKING:
    from annotate.models import Queue

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "load-test-password"
KINDS = ("next", "page", "draft", "submit")  # one annotator's cycle; logins come before it
REQUEST_TIMEOUT_S = 30  # gunicorn's worker timeout: a request never legitimately takes longer
LOGIN_TIMEOUT_S = 120  # every annotator logged in (a password hash each) within this
ERROR_PAUSE_S = 0.2  # after a failed request, so a dead server is not hammered in a tight loop

VERSION = re.compile(r'<input type="hidden" name="version" value="(\d+)"')
LAST_STEP = re.compile(r'<input type="number" name="first_critical_step"[^>]*\bmax="(\d+)"')
CATEGORY = re.compile(r'<input type="radio" name="error_category" value="([^"]+)"')
TRAJECTORY = re.compile(r"^/t/(\d+)/")
DRAFT_SAVED = re.compile(r"Draft saved \d\d:\d\d:\d\d")
SUBMITTED = re.compile(r"Submitted \d\d:\d\d:\d\d")


# --- the driver: runs in its own process, without Django ------------------------------------


class RequestFailed(Exception):
    """A request that did not get the answer a browser would act on."""


class Browser:
    """One annotator's HTTP/1.1 connection (kept alive where the server allows) and cookies."""

    def __init__(self, host: str, port: int) -> None:
        self.connection = http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT_S)
        self.cookies: dict[str, str] = {}

    def request(
        self, method: str, path: str, form: dict[str, Any] | None = None, htmx: bool = False
    ) -> tuple[int, str, str]:
        """(status, Location header, body); RequestFailed on a connection error."""
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        body = None
        if form is not None:
            body = urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            headers["X-CSRFToken"] = self.cookies.get("csrftoken", "")
        if htmx:
            headers["HX-Request"] = "true"
        try:
            self.connection.request(method, path, body=body, headers=headers)
            response = self.connection.getresponse()
            text = response.read().decode()
        except (OSError, http.client.HTTPException) as error:
            self.connection.close()
            raise RequestFailed(f"connection: {type(error).__name__}") from error
        for header in response.headers.get_all("Set-Cookie") or []:
            for name, morsel in SimpleCookie(header).items():
                self.cookies[name] = morsel.value
        return response.status, response.getheader("Location", ""), text


@dataclass
class Tally:
    """What one annotator did and saw."""

    username: str
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)
    submitted: list[int] = field(default_factory=list)  # trajectories confirmed "Submitted"
    handed_again: list[int] = field(default_factory=list)  # offered after it was submitted
    ran_dry: bool = False


class Annotator:
    """A simulated annotator: logs in, then claims, reads, drafts and submits until told."""

    def __init__(self, host: str, port: int, queue_id: int, username: str, seed: int) -> None:
        self.browser = Browser(host, port)
        self.queue_id = queue_id
        self.tally = Tally(username)
        self.random = random.Random(seed)
        self.current = "login"  # the kind of the request under way, for its errors

    def timed(
        self, kind: str, method: str, path: str, form: dict[str, Any] | None = None
    ) -> tuple[int, str, str]:
        self.current = kind
        started = time.perf_counter()
        status, location, body = self.browser.request(
            method, path, form, htmx=method == "POST" and kind in KINDS
        )
        self.tally.latencies[kind].append(round((time.perf_counter() - started) * 1000, 2))
        if not 200 <= status < 400:
            raise RequestFailed(f"HTTP {status}")
        return status, location, body

    def log_in(self) -> None:
        self.timed("login page", "GET", "/accounts/login/")
        form = {
            "username": self.tally.username,
            "password": PASSWORD,
            "csrfmiddlewaretoken": self.browser.cookies.get("csrftoken", ""),
        }
        status, _, _ = self.timed("login", "POST", "/accounts/login/", form)
        if status != 302:
            raise RequestFailed("login refused")

    def cycle(self) -> bool:
        """One item from claim to submit; False when the queue has nothing left for them."""
        status, location, _ = self.timed("next", "GET", f"/q/{self.queue_id}/next/")
        if status == 200:
            return False
        found = TRAJECTORY.match(location)
        if status != 302 or not found:
            raise RequestFailed(f"no redirect to a review page ({status} {location!r})")
        trajectory = int(found.group(1))
        if trajectory in self.tally.submitted:
            self.tally.handed_again.append(trajectory)
        _, _, page = self.timed("page", "GET", location)
        version, last_step = VERSION.search(page), LAST_STEP.search(page)
        categories = CATEGORY.findall(page)
        if not (version and last_step and categories):
            raise RequestFailed("review page without the annotation form")
        form_url = f"/t/{trajectory}/annotation/?queue={self.queue_id}"
        draft = {"version": version.group(1), "verdict": "failure", "rationale": "Looking."}
        _, _, answer = self.timed("draft", "POST", form_url, draft)
        version = VERSION.search(answer)
        if not (DRAFT_SAVED.search(answer) and version):
            raise RequestFailed("draft answer without 'Draft saved'")
        submit = {
            "version": version.group(1),
            "intent": "submit",
            "verdict": "failure",
            "first_critical_step": self.random.randint(0, int(last_step.group(1))),
            "error_category": self.random.choice(categories),
            "rationale": "The agent acted without the user's explicit confirmation.",
            "confidence": "0.8",
        }
        _, _, answer = self.timed("submit", "POST", form_url, submit)
        if not SUBMITTED.search(answer):
            raise RequestFailed("submit answer without 'Submitted'")
        self.tally.submitted.append(trajectory)
        return True

    def work(self, start: threading.Barrier, deadline: list[float]) -> None:
        """Log in, wait for everyone, then cycle until the deadline (set when all are in)."""
        logged_in = True
        try:
            self.log_in()
        except RequestFailed as error:
            logged_in = False
            self.failed(error)
        try:
            start.wait(LOGIN_TIMEOUT_S)
        except threading.BrokenBarrierError:
            self.tally.errors["login: not everyone logged in in time"] += 1
            return
        # Idle while the others logged in: a kept-alive connection may have been closed by
        # now, and http.client, unlike a browser, does not retry on a fresh one.
        self.browser.connection.close()
        while logged_in and time.monotonic() < deadline[0]:
            try:
                if not self.cycle():
                    self.tally.ran_dry = True
                    return
            except RequestFailed as error:
                self.failed(error)

    def failed(self, error: RequestFailed) -> None:
        """Count the error under the kind of request that failed; pause before going on."""
        self.tally.errors[f"{self.current}: {error}"] += 1
        time.sleep(ERROR_PAUSE_S)


def run_annotators(config: dict[str, Any]) -> dict[str, Any]:
    """Every annotator in its own thread; their merged tally as JSON-ready data."""
    url = urlsplit(config["url"])
    annotators = [
        Annotator(url.hostname, url.port, config["queue_id"], username, seed)
        for seed, username in enumerate(config["usernames"])
    ]
    deadline = [0.0]
    started = [0.0, 0.0]  # wall clock and this process's CPU time when the logins are done

    def open_the_window() -> None:
        started[:] = time.monotonic(), time.process_time()
        deadline[0] = started[0] + config["seconds"]

    start = threading.Barrier(len(annotators), action=open_the_window)
    threads = [
        threading.Thread(target=a.work, args=(start, deadline), daemon=True) for a in annotators
    ]
    for thread in threads:
        thread.start()
    limit = time.monotonic() + LOGIN_TIMEOUT_S + config["seconds"] + 4 * REQUEST_TIMEOUT_S
    for thread in threads:
        thread.join(max(limit - time.monotonic(), 0))
    stuck = sum(thread.is_alive() for thread in threads)
    elapsed = time.monotonic() - started[0] if started[0] else 0.0
    latencies: dict[str, list[float]] = defaultdict(list)
    errors: Counter[str] = Counter({"annotator still working at the limit": stuck} if stuck else {})
    for annotator in annotators:
        for kind, values in annotator.tally.latencies.items():
            latencies[kind].extend(values)
        errors.update(annotator.tally.errors)
    return {
        "seconds": elapsed,
        "latencies": latencies,
        "errors": errors,
        "submitted": [[t, a.tally.username] for a in annotators for t in a.tally.submitted],
        "handed_again": [[t, a.tally.username] for a in annotators for t in a.tally.handed_again],
        "ran_dry": sum(a.tally.ran_dry for a in annotators),
        "client_cpu_s": time.process_time() - started[1],
    }


@dataclass(frozen=True)
class Result:
    """The driver's tally of all annotators; `submitted` and `handed_again` are
    (trajectory, username) pairs."""

    seconds: float
    latencies: dict[str, list[float]]
    errors: dict[str, int]
    submitted: list[tuple[int, str]]
    handed_again: list[tuple[int, str]]
    ran_dry: int
    client_cpu_s: float  # the driver process's CPU time: it shares the machine with the server

    @property
    def requests(self) -> int:
        return sum(len(self.latencies.get(kind, ())) for kind in KINDS)


def drive(url: str, queue_id: int, usernames: list[str], seconds: float) -> Result:
    """Run the annotators from another process (this file with --drive), so the client's
    threads share no interpreter with the caller."""
    config = {"url": url, "queue_id": queue_id, "usernames": usernames, "seconds": seconds}
    limit = LOGIN_TIMEOUT_S + seconds + 5 * REQUEST_TIMEOUT_S
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--drive"],
        input=json.dumps(config),
        stdout=subprocess.PIPE,
        text=True,
        timeout=limit,
        check=True,
    )
    data = json.loads(done.stdout)
    pairs = ("submitted", "handed_again")
    return Result(**{**data, **{key: [tuple(pair) for pair in data[key]] for key in pairs}})


# --- the server ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    url: str
    log: Path  # gunicorn's output: its errors and Django's logged tracebacks

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def serve(database_url: str, workers: int, threads: int, folder: Path) -> Iterator[Server]:
    """gunicorn serving the app on `database_url` at a free loopback port, stopped (SIGTERM,
    then SIGKILL to its process group) however the block ends."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "DEBUG": "0", "ALLOWED_HOSTS": "127.0.0.1"}
    env.pop("CACHE_URL", None)  # per-worker counters are fine: no login fails here
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "config.wsgi",
        f"--bind=127.0.0.1:{port}",
        f"--workers={workers}",
        f"--threads={threads}",
        f"--worker-class={'gthread' if threads > 1 else 'sync'}",
        f"--timeout={REQUEST_TIMEOUT_S}",
        "--graceful-timeout=5",
    ]
    if gunicorn.version_info >= (25, 1):  # else every server shares ~/.gunicorn/gunicorn.ctl
        command.append("--no-control-socket")
    server = Server(f"http://127.0.0.1:{port}", folder / "gunicorn.log")
    with open(server.log, "wb") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_until_up(process, port, server)
        yield server
    finally:
        stop(process)


def wait_until_up(process: subprocess.Popen, port: int, server: Server, seconds: int = 60) -> None:
    """Until every worker answers the login page (workers import Django one by one)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"gunicorn exited ({process.returncode}):\n{server.log_tail()}")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            connection.request("GET", "/accounts/login/")
            if connection.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
        finally:
            connection.close()
    raise RuntimeError(f"gunicorn did not answer in {seconds} s:\n{server.log_tail()}")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(15)


# --- the database: seeding and checks (Django, in the calling process) ----------------------


def fresh_database(server_url: str, name: str) -> str:
    """Drop and create database `name` on the server of `server_url`; its URL."""
    import psycopg
    from psycopg import sql

    parts = urlsplit(server_url)
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return urlunsplit(parts._replace(path=f"/{name}"))


def seed(trajectories: int, annotators: int, overlap: int) -> tuple[Queue, list[str]]:
    """A project of `trajectories` demo runs, `annotators` members who log in with PASSWORD,
    and a queue of every run for them with `overlap`; (queue, usernames)."""
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import User
    from django.db import connection

    from annotate.queues import create_queue
    from curation.demo import demo_records
    from curation.formats.reading import RawItem
    from curation.ingest import import_items
    from curation.models import Membership, Project

    project = Project.objects.create(slug="load", name="Load test")
    records = demo_records(trajectories)
    import_items(project, (RawItem("load", f"item {n}", r) for n, r in enumerate(records)))
    hashed = make_password(PASSWORD)  # one hash for all: each takes a third of a second
    users = User.objects.bulk_create(
        User(username=f"annotator-{n:03}", password=hashed) for n in range(annotators)
    )
    Membership.objects.bulk_create(
        Membership(project=project, user=user, role=Membership.Role.ANNOTATOR) for user in users
    )
    queue = create_queue(project, "Load test", {}, overlap, users, None)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # fresh tables: plan the claims on real statistics
    return queue, [user.username for user in users]


@dataclass(frozen=True)
class Checks:
    """What the database holds after the run, against what the annotators saw."""

    over_assigned: int  # items with more assignments than the overlap
    miscounted: int  # items whose claims counter differs from their assignments
    handed_again: int  # items offered to someone who had submitted them
    lost: list[tuple[int, str]]  # confirmed to the annotator, not stored as submitted + done
    unseen: list[tuple[int, str]]  # stored as submitted or done, never confirmed

    def failures(self) -> list[str]:
        found = {
            "items over-assigned": self.over_assigned,
            "items with a wrong claims counter": self.miscounted,
            "items handed again to their annotator": self.handed_again,
            "submissions lost": len(self.lost),
            "submissions nobody saw confirmed": len(self.unseen),
        }
        return [f"{count} {what}" for what, count in found.items() if count]


def check(queue: Queue, result: Result) -> Checks:
    from django.db.models import Count, F

    from annotate.models import Annotation, Assignment

    items = queue.items.annotate(assigned=Count("assignments"))
    done = set(
        Assignment.objects.filter(item__queue=queue, status=Assignment.Status.DONE).values_list(
            "item__trajectory_id", "annotator__username"
        )
    )
    stored = set(
        Annotation.objects.filter(
            trajectory__project=queue.project,
            source=Annotation.Source.HUMAN,
            status=Annotation.Status.SUBMITTED,
        ).values_list("trajectory_id", "author__username")
    )
    seen = set(result.submitted)
    return Checks(
        over_assigned=items.filter(assigned__gt=queue.overlap).count(),
        miscounted=items.exclude(claims=F("assigned")).count(),
        handed_again=len(result.handed_again),
        lost=sorted(seen - (done & stored)),
        unseen=sorted((done | stored) - seen),
    )


# --- the report ------------------------------------------------------------------------------


def percentile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def figures(result: Result) -> str:
    """Throughput and latency per kind of request, then the errors."""
    seconds = result.seconds or float("nan")  # 0: the annotators never all logged in
    lines = [
        f"{result.requests:,} requests in {result.seconds:.1f} s: "
        f"{result.requests / seconds:,.1f} requests/s, {len(result.submitted):,} "
        f"submissions ({len(result.submitted) / seconds:,.1f}/s)",
        f"{'kind':<11} {'count':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}",
    ]
    everything = [v for kind in KINDS for v in result.latencies.get(kind, [])]
    rows = [(kind, result.latencies.get(kind, [])) for kind in ("login page", "login", *KINDS)]
    for kind, values in [*rows, ("all 4 kinds", everything)]:
        cells = " ".join(f"{percentile(values, q):>8.1f}" for q in (50, 95, 99))
        lines.append(f"{kind:<11} {len(values):>7,} {cells}")
    lines.append(
        f"the client process used {result.client_cpu_s:.1f} s of CPU "
        f"({100 * result.client_cpu_s / seconds:.0f}% of one core over the run)"
    )
    errors = sum(result.errors.values())
    lines.append(f"errors: {errors}" + "".join(f"\n  {n} x {e}" for e, n in result.errors.items()))
    if result.ran_dry:
        lines.append(f"{result.ran_dry} annotators ran out of items (raise --trajectories)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--trajectories", type=int, default=2000)
    parser.add_argument("--overlap", type=int, default=2)
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=1, help="per worker; over 1: gthread")
    parser.add_argument("--database", default="curation_load", help="dropped and made again")
    parser.add_argument("--drive", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:  # the driver process: a config on stdin, the tally on stdout
        print(json.dumps(run_annotators(json.load(sys.stdin))))
        return

    server_url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/")
    os.environ["DATABASE_URL"] = fresh_database(server_url, args.database)
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    queue, usernames = seed(args.trajectories, args.annotators, args.overlap)
    print(
        f"seeded {args.trajectories:,} runs, {args.annotators} annotators and a queue "
        f"(overlap {args.overlap}) in {time.perf_counter() - started:.0f} s; gunicorn "
        f"{args.workers} {'gthread' if args.threads > 1 else 'sync'} workers"
        + (f" x {args.threads} threads" if args.threads > 1 else "")
        + f", {os.cpu_count()} CPUs"
    )
    with tempfile.TemporaryDirectory() as folder:
        with serve(os.environ["DATABASE_URL"], args.workers, args.threads, Path(folder)) as server:
            result = drive(server.url, queue.pk, usernames, args.seconds)
            print(figures(result))
            if result.errors:
                print(f"gunicorn's log, last lines:\n{server.log_tail()}")
    failures = check(queue, result).failures()
    print("checks: " + ("; ".join(failures) if failures else "all passed"))
    sys.exit(1 if failures or result.errors else 0)


if __name__ == "__main__":
    main()
