"""A trained critic on disk: one `.npz` file holding the model's arrays and a JSON header
(format, encoder, temperature, feature names, and whatever the trainer adds: version, project,
training summary, held-out metrics). Loaded with `allow_pickle=False`: an artifact is data,
never code. Writes go to a temporary file renamed into place, so a reader never sees half."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from workers.critic.model import StepCritic

FORMAT = "step-critic/1"
ARRAYS = ("pca_mean", "pca_components", "feature_mean", "feature_scale", "weights")


class ArtifactError(ValueError):
    """A file that is not a critic artifact this code can read."""


def save(critic: StepCritic, path: Path, extra: dict[str, Any] | None = None) -> Path:
    header = {
        "format": FORMAT,
        "encoder": critic.encoder,
        "temperature": critic.temperature,
        "feature_names": critic.feature_names,
        **(extra or {}),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".npz.tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            np.savez(
                out,
                header=np.frombuffer(json.dumps(header).encode(), np.uint8),
                **{name: getattr(critic, name) for name in ARRAYS},
            )
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def load(path: Path | str) -> tuple[StepCritic, dict[str, Any]]:
    """The critic in the file and its header."""
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(data["header"].tobytes())
            arrays = {name: data[name] for name in ARRAYS}
    except FileNotFoundError:
        raise ArtifactError(f"no critic artifact at {path}") from None
    except (OSError, ValueError, KeyError) as error:
        raise ArtifactError(f"{path} is not a critic artifact: {error}") from None
    if header.get("format") != FORMAT:
        raise ArtifactError(f"{path}: format {header.get('format')!r}, expected {FORMAT!r}")
    critic = StepCritic(
        encoder=header["encoder"],
        feature_names=list(header["feature_names"]),
        temperature=float(header["temperature"]),
        **arrays,
    )
    return critic, header
