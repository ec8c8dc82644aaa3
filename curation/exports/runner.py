"""Exports as rows of work: check a request, create its `DatasetExport` (the next version of its
project, kind and filter), hand it to a worker, run it end to end.

Files are written to a temporary folder and only then copied to the "exports" storage (a
Django STORAGES alias: a local folder by default, S3-compatible storage where configured), so
a failed export leaves nothing behind there.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
from celery import current_app
from django.contrib.auth.models import AbstractBaseUser
from django.core.files import File
from django.core.files.storage import Storage, storages
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from curation.exports.filters import check_spec, selected
from curation.exports.kinds import BUILDERS
from curation.exports.manifest import Stats, content_sha256, dataset_card, manifest
from curation.exports.pipeline import write_dataset
from curation.exports.spec import FORMATS, SORTED, ExportSpec, FilterError, parse_spec
from curation.exports.writing import DataFile, sha256_of
from curation.models import DatasetExport, Project

EXPORT_TASK = "workers.export_dataset"  # by name: curation does not import workers
EXPORT_QUEUE = "export"
STORAGE_ALIAS = "exports"
CHUNK_SIZE = 200
CARD, MANIFEST = "README.md", "manifest.json"


def export_storage() -> Storage:
    return storages[STORAGE_ALIAS]


def check_request(
    project: Project, kind: str, format_name: str, data: Mapping[str, Any]
) -> ExportSpec:
    """The spec of a requested export; FilterError names the first thing wrong with it."""
    if format_name not in FORMATS:
        raise FilterError("format", f"unknown format {format_name!r}; choose from jsonl, parquet")
    spec = parse_spec(kind, data)
    check_spec(project, spec)
    return spec


def create_export(
    project: Project, spec: ExportSpec, format_name: str, user: AbstractBaseUser | None
) -> DatasetExport:
    """A queued export, the next version of its (project, kind, filter and format)."""
    key = spec.key(format_name)
    same = DatasetExport.objects.filter(project=project, kind=spec.kind, filter_key=key)
    attempts = 3
    while True:
        try:
            with transaction.atomic():
                last = same.aggregate(last=Max("version"))["last"] or 0
                return DatasetExport.objects.create(
                    project=project,
                    kind=spec.kind,
                    format=format_name,
                    filter=spec.as_dict(),
                    filter_key=key,
                    version=last + 1,
                    created_by=user if user and user.is_authenticated else None,
                )
        except IntegrityError:  # another request took that version number first
            attempts -= 1
            if not attempts:
                raise


def enqueue_export(export: DatasetExport) -> None:
    """Send the export to an `export` worker once the transaction that created it commits."""
    transaction.on_commit(
        lambda: current_app.send_task(EXPORT_TASK, args=[export.pk], queue=EXPORT_QUEUE)
    )


def _store(export: DatasetExport, folder: Path, files: list[DataFile], out: Path | None) -> list:
    """Copy the data files, card and manifest to the export storage (and to `out`)."""
    storage = export_storage()
    prefix = f"exports/{export.project.slug}/{export.kind}/{export.pk}"
    splits = {f.name: {"split": f.split, "rows": f.rows} for f in files}
    stored = []
    for name in [*splits, CARD, MANIFEST]:
        path = folder / name
        target = f"{prefix}/{name}"
        if storage.exists(target):  # a rerun after a lost worker: same name, fresh content
            storage.delete(target)
        with open(path, "rb") as stream:
            saved = storage.save(target, File(stream, name=name))
        size, sha256 = path.stat().st_size, sha256_of(path)
        stored.append(
            {"name": name, "path": saved, "bytes": size, "sha256": sha256, **splits.get(name, {})}
        )
        if out is not None:
            shutil.copyfile(path, out / name)
    return stored


def _write(
    export: DatasetExport,
    spec: ExportSpec,
    folder: Path,
    chunk_size: int,
    after_batch: Callable[[int], None] | None,
) -> tuple[Stats, list[DataFile], dict[str, Any]]:
    builder = BUILDERS[export.kind]
    runs = selected(export.project, spec)
    export.total = runs.count()
    export.save(update_fields=["total"])

    def progress(done: int) -> None:
        DatasetExport.objects.filter(pk=export.pk).update(processed=done)
        if after_batch:
            after_batch(done)

    stats, files = write_dataset(runs, builder, spec, folder, export.format, chunk_size, progress)
    card = dataset_card(export.project.slug, export.format, spec, builder, stats, files)
    (folder / CARD).write_text(card, encoding="utf-8")
    card_path = folder / CARD
    card_file = {"name": CARD, "bytes": card_path.stat().st_size, "sha256": sha256_of(card_path)}
    data = manifest(export, spec, builder, stats, files, card_file)
    (folder / MANIFEST).write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2 | SORTED))
    return stats, files, data


def _previous(export: DatasetExport) -> DatasetExport | None:
    return (
        DatasetExport.objects.filter(
            project=export.project_id,
            kind=export.kind,
            filter_key=export.filter_key,
            version__lt=export.version,
            status=DatasetExport.Status.DONE,
        )
        .order_by("-version")
        .first()
    )


def run_export(
    export_id: int,
    out: Path | None = None,
    chunk_size: int = CHUNK_SIZE,
    after_batch: Callable[[int], None] | None = None,
) -> DatasetExport:
    """Run one export; `out` also receives a copy of its files. Done or failed exports are
    left alone, so a redelivered task is harmless; one left `running` by a dead worker runs
    again from the start."""
    export = DatasetExport.objects.select_related("project", "created_by").get(pk=export_id)
    if export.status in (DatasetExport.Status.DONE, DatasetExport.Status.FAILED):
        return export
    export.status = DatasetExport.Status.RUNNING
    export.started_at = timezone.now()
    export.processed = 0
    export.save(update_fields=["status", "started_at", "processed"])
    try:
        spec = check_request(export.project, export.kind, export.format, export.filter)
        with tempfile.TemporaryDirectory(prefix="export-") as tmp:
            folder = Path(tmp)
            stats, files, data = _write(export, spec, folder, chunk_size, after_batch)
            stored = _store(export, folder, files, out)
    except Exception as exc:  # the row must say what happened, whatever it was
        export.status = DatasetExport.Status.FAILED
        export.error = f"{type(exc).__name__}: {exc}"
        export.finished_at = timezone.now()
        export.save(update_fields=["status", "error", "finished_at"])
        return export
    previous = _previous(export)
    export.content_sha256 = content_sha256(files)
    export.changed = None if previous is None else previous.content_sha256 != export.content_sha256
    export.files = stored
    export.counts = stats.counts()
    export.processed = stats.runs_read
    export.manifest = data
    export.status = DatasetExport.Status.DONE
    export.finished_at = timezone.now()
    export.save()
    return export
