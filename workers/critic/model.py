"""The step model: a conditional (listwise) logistic regression over the steps of a trajectory.

Each step k gets a score w · x_k; the probability that k is the first critical error is the
softmax of the scores over the trajectory's steps, divided by a temperature fitted on held-out
predictions so that the top probability can be read as a confidence. x_k is the step's
structural features (features.py), three similarities from the embeddings (to the task, to
the most similar earlier step, to the step before) and the step embedding projected on its
first principal components; every column is standardised on the training steps.

Why this model: a labelled project has tens to a few hundred failures, a few steps each. A
convex model with one weight per feature trains exactly (Newton's method, a few milliseconds),
cannot overfit the way a sequence network would on 100 trajectories, and its weights can be
read. The sequence context it needs (an error in the next tool result, a repeat of an earlier
step, the position) is in the features instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workers.critic.features import STRUCTURAL, StepTable

SIMILARITIES = ("similarity_task", "similarity_earlier_max", "similarity_previous")
NEWTON_STEPS = 50
TOLERANCE = 1e-8


@dataclass
class StepCritic:
    encoder: str
    feature_names: list[str]
    pca_mean: np.ndarray  # (embedding dim,)
    pca_components: np.ndarray  # (components, embedding dim)
    feature_mean: np.ndarray  # (features,)
    feature_scale: np.ndarray  # (features,)
    weights: np.ndarray  # (features,)
    temperature: float = 1.0

    def design(self, table: StepTable, vectors: np.ndarray, task: np.ndarray) -> np.ndarray:
        raw = raw_design(table, vectors, task, self.pca_mean, self.pca_components)
        return (raw - self.feature_mean) / self.feature_scale

    def scores(self, table: StepTable, vectors: np.ndarray, task: np.ndarray) -> np.ndarray:
        """The steps' scores before the temperature."""
        return self.design(table, vectors, task) @ self.weights

    def probabilities(self, table: StepTable, vectors: np.ndarray, task: np.ndarray) -> np.ndarray:
        """P(step k is the first critical error) for each step; sums to one."""
        return softmax(self.scores(table, vectors, task) / self.temperature)


def softmax(scores: np.ndarray) -> np.ndarray:
    shifted = np.exp(scores - scores.max())
    return shifted / shifted.sum()


def similarities(vectors: np.ndarray, task: np.ndarray) -> np.ndarray:
    """(steps, 3): cosine to the task, to the most similar earlier step, to the step before
    (the vectors are L2-normalised)."""
    count = len(vectors)
    gram = vectors @ vectors.T
    earlier = np.where(np.tril(np.ones((count, count), bool), -1), gram, -np.inf).max(axis=1)
    previous = np.concatenate([[0.0], np.diag(gram, -1)]) if count > 1 else np.zeros(1)
    return np.stack([vectors @ task, np.where(np.isfinite(earlier), earlier, 0.0), previous], 1)


def raw_design(
    table: StepTable,
    vectors: np.ndarray,
    task: np.ndarray,
    pca_mean: np.ndarray,
    pca_components: np.ndarray,
) -> np.ndarray:
    projected = (vectors - pca_mean) @ pca_components.T
    return np.hstack([table.structural, similarities(vectors, task), projected]).astype(np.float64)


def feature_names(components: int) -> list[str]:
    return [*STRUCTURAL, *SIMILARITIES, *(f"embedding_pc{i + 1}" for i in range(components))]


def principal_components(vectors: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The mean and the first `count` principal directions (rows) of these vectors."""
    mean = vectors.mean(axis=0)
    centred = (vectors - mean).astype(np.float64)
    values, directions = np.linalg.eigh(centred.T @ centred)
    order = np.argsort(values)[::-1][: min(count, len(vectors) - 1, len(values))]
    return mean, directions[:, order].T.astype(np.float32)


class Stacked:
    """Many trajectories' design matrices stacked into one, for vectorised training."""

    def __init__(self, designs: Sequence[np.ndarray], targets: Sequence[int]) -> None:
        self.rows = np.concatenate(designs)
        sizes = np.array([len(d) for d in designs])
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        self.group = np.repeat(np.arange(len(designs)), sizes)
        self.target_rows = self.rows[self.starts + np.asarray(targets)]
        self.count = len(designs)

    def log_norms(self, scores: np.ndarray) -> np.ndarray:
        tops = np.maximum.reduceat(scores, self.starts)
        sums = np.add.reduceat(np.exp(scores - tops[self.group]), self.starts)
        return tops + np.log(sums)


def _objective(
    weights: np.ndarray, data: Stacked, l2: float
) -> tuple[float, np.ndarray, np.ndarray]:
    """Mean negative log-likelihood plus l2/2 |w|^2, its gradient and its Hessian."""
    scores = data.rows @ weights
    log_norms = data.log_norms(scores)
    p = np.exp(scores - log_norms[data.group])
    weighted = data.rows * p[:, None]
    means = np.add.reduceat(weighted, data.starts)  # each trajectory's expected row
    n = data.count
    loss = (log_norms.sum() - (data.target_rows @ weights).sum()) / n
    gradient = (means.sum(axis=0) - data.target_rows.sum(axis=0)) / n
    hessian = (weighted.T @ data.rows - means.T @ means) / n
    size = len(weights)
    return (
        loss + 0.5 * l2 * weights @ weights,
        gradient + l2 * weights,
        hessian + l2 * np.eye(size),
    )


def fit_weights(designs: Sequence[np.ndarray], targets: Sequence[int], l2: float) -> np.ndarray:
    """The weights minimising the regularised listwise log-loss (convex: Newton's method with
    a backtracking line search)."""
    data = Stacked(designs, targets)
    weights = np.zeros(data.rows.shape[1])
    loss, gradient, hessian = _objective(weights, data, l2)
    for _ in range(NEWTON_STEPS):
        step = np.linalg.solve(hessian, gradient)
        decrease = gradient @ step
        if decrease < TOLERANCE:
            break
        size = 1.0
        trial = weights - step
        trial_loss, trial_gradient, trial_hessian = _objective(trial, data, l2)
        while trial_loss > loss - 0.25 * size * decrease and size > 1e-4:
            size /= 2
            trial = weights - size * step
            trial_loss, trial_gradient, trial_hessian = _objective(trial, data, l2)
        if trial_loss > loss:  # converged as far as floating point allows
            break
        weights, loss, gradient, hessian = trial, trial_loss, trial_gradient, trial_hessian
    return weights


def fit(
    encoder: str,
    tables: Sequence[StepTable],
    vectors: Sequence[np.ndarray],
    tasks: Sequence[np.ndarray],
    targets: Sequence[int],
    pca: tuple[np.ndarray, np.ndarray],
    l2: float,
) -> StepCritic:
    """A critic (temperature 1) trained on these trajectories and their critical steps, with
    the embeddings projected on `pca` (mean, directions: `principal_components`)."""
    mean, rows = pca
    raws = [raw_design(t, v, u, mean, rows) for t, v, u in zip(tables, vectors, tasks, strict=True)]
    stacked = np.concatenate(raws)
    feature_mean = stacked.mean(axis=0)
    scale = stacked.std(axis=0)
    scale = np.where(scale > 1e-6, scale, 1.0)
    designs = [(raw - feature_mean) / scale for raw in raws]
    weights = fit_weights(designs, targets, l2)
    return StepCritic(encoder, feature_names(len(rows)), mean, rows, feature_mean, scale, weights)


def fit_temperature(scores: Sequence[np.ndarray], targets: Sequence[int]) -> float:
    """The temperature that minimises the log-loss of held-out scores (golden-section search
    over log T in [-2, 2])."""
    data = Stacked([s[:, None] for s in scores], targets)
    values, chosen = data.rows[:, 0], data.target_rows[:, 0].sum()

    def loss(log_t: float) -> float:
        t = np.exp(log_t)
        return float(data.log_norms(values / t).sum() - chosen / t)

    low, high = -2.0, 2.0
    ratio = (np.sqrt(5) - 1) / 2
    for _ in range(40):
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        if loss(a) < loss(b):
            high = b
        else:
            low = a
    return float(np.exp((low + high) / 2))
