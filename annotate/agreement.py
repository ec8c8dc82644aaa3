"""Human-human agreement and label distributions, as pure functions over plain records.

Every submitted human annotation counts, and so does every gold label (an annotator named by
its `source_name`). Agreement is pairwise: two annotators are compared on the trajectories
both labelled.

- Verdicts: Cohen's kappa per annotator pair, over the items both gave a verdict, and the
  unweighted mean of the pairs' kappas (Light's kappa). A pair whose chance agreement is 1
  (both gave one and the same verdict throughout) has no kappa and is left out of the mean.
- First critical step: per comparison (one item, one pair of annotators who both named a
  step), exact agreement and agreement within one step.
- Category: per comparison of two annotators who both named a category, exact agreement.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

POSITION_BINS = 10


@dataclass(frozen=True)
class Judgement:
    """One annotator's label of one item (a trajectory)."""

    item: int
    annotator: str
    verdict: str = ""
    critical_step: int | None = None
    category: str = ""


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa with what it is computed from: `counts[i][j]` is the number of items the
    first annotator labelled `labels[i]` and the second `labels[j]`."""

    labels: list[str]
    counts: list[list[int]]
    n: int
    observed: float | None
    expected: float | None
    kappa: float | None

    @property
    def rows(self) -> list[tuple[str, list[int]]]:
        """The contingency table's rows, each with the first annotator's label."""
        return list(zip(self.labels, self.counts, strict=True))


@dataclass(frozen=True)
class Rate:
    """`agree` of `n` comparisons agree; the comparisons cover `items` items."""

    agree: int
    n: int
    items: int

    @property
    def fraction(self) -> float | None:
        return self.agree / self.n if self.n else None


@dataclass(frozen=True)
class PairAgreement:
    first: str
    second: str
    items: int
    verdict: Kappa


@dataclass(frozen=True)
class AgreementReport:
    annotators: int
    items: int
    pairs: list[PairAgreement]
    mean_kappa: float | None
    kappa_pairs: int
    critical_step_exact: Rate
    critical_step_within_one: Rate
    category: Rate


@dataclass(frozen=True)
class Bar:
    label: str
    count: int
    width: float

    @property
    def width_text(self) -> str:
        """The width for an SVG attribute: a plain number with a dot, whatever the locale."""
        return f"{self.width:.1f}"


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> Kappa:
    """Cohen's kappa of two annotators over (first's label, second's label) pairs; None where
    it is undefined (no items, or chance agreement of 1: one label used by both throughout)."""
    labels = sorted({label for pair in pairs for label in pair})
    position = {label: i for i, label in enumerate(labels)}
    counts = [[0] * len(labels) for _ in labels]
    for first, second in pairs:
        counts[position[first]][position[second]] += 1
    n = len(pairs)
    if not n:
        return Kappa(labels, counts, 0, None, None, None)
    observed = sum(counts[i][i] for i in range(len(labels))) / n
    expected = sum(sum(counts[i]) * sum(row[i] for row in counts) for i in range(len(labels))) / (
        n * n
    )
    kappa = (observed - expected) / (1 - expected) if expected < 1 else None
    return Kappa(labels, counts, n, observed, expected, kappa)


def _by_item(judgements: Iterable[Judgement]) -> dict[int, dict[str, Judgement]]:
    """Judgements by item and annotator, keeping only items with at least two annotators."""
    items: dict[int, dict[str, Judgement]] = defaultdict(dict)
    for judgement in judgements:
        items[judgement.item][judgement.annotator] = judgement
    return {item: by for item, by in items.items() if len(by) >= 2}


def _rate(comparisons: list[tuple[int, bool]]) -> Rate:
    """A rate from (item, agreed) comparisons."""
    return Rate(
        agree=sum(agreed for _, agreed in comparisons),
        n=len(comparisons),
        items=len({item for item, _ in comparisons}),
    )


def agreement(judgements: Iterable[Judgement]) -> AgreementReport:
    """Pairwise human-human agreement over the items at least two annotators labelled."""
    items = _by_item(judgements)
    verdicts: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    shared: Counter[tuple[str, str]] = Counter()
    exact: list[tuple[int, bool]] = []
    within_one: list[tuple[int, bool]] = []
    category: list[tuple[int, bool]] = []
    for item, by_annotator in sorted(items.items()):
        for a, b in combinations(sorted(by_annotator), 2):
            first, second = by_annotator[a], by_annotator[b]
            shared[a, b] += 1
            if first.verdict and second.verdict:
                verdicts[a, b].append((first.verdict, second.verdict))
            if first.critical_step is not None and second.critical_step is not None:
                distance = abs(first.critical_step - second.critical_step)
                exact.append((item, distance == 0))
                within_one.append((item, distance <= 1))
            if first.category and second.category:
                category.append((item, first.category == second.category))
    pairs = [
        PairAgreement(a, b, count, cohen_kappa(verdicts[a, b]))
        for (a, b), count in sorted(shared.items())
    ]
    kappas = [p.verdict.kappa for p in pairs if p.verdict.kappa is not None]
    return AgreementReport(
        annotators=len({name for by in items.values() for name in by}),
        items=len(items),
        pairs=pairs,
        mean_kappa=sum(kappas) / len(kappas) if kappas else None,
        kappa_pairs=len(kappas),
        critical_step_exact=_rate(exact),
        critical_step_within_one=_rate(within_one),
        category=_rate(category),
    )


def bars(counts: Sequence[tuple[str, int]]) -> list[Bar]:
    """Bars of a chart, each as wide as its share of the largest count (in percent)."""
    top = max((count for _, count in counts), default=0)
    return [Bar(label, count, 100 * count / top if top else 0.0) for label, count in counts]


def category_counts(counts: Mapping[str, int], taxonomy: Sequence[str]) -> list[tuple[str, int]]:
    """Counts of every taxonomy category (unused ones as 0) and of any other category found,
    most frequent first; ties keep taxonomy order, then name order."""
    order = {name: i for i, name in enumerate(taxonomy)}
    names = list(taxonomy) + sorted(set(counts) - set(order))
    return sorted(
        ((name, counts.get(name, 0)) for name in names),
        key=lambda entry: (-entry[1], order.get(entry[0], len(order)), entry[0]),
    )


def position_bin(step: int, length: int, bins: int = POSITION_BINS) -> int:
    """The bin of a step at `step` (from 0) in a trajectory of `length` steps: bin i holds the
    steps in [i/bins, (i+1)/bins) of the way through; a step past the end goes in the last."""
    return min(bins - 1, step * bins // length)


def position_counts(
    steps: Iterable[tuple[int, int]], bins: int = POSITION_BINS
) -> list[tuple[str, int]]:
    """How many (step, trajectory length) fall in each position bin, labelled by its range in
    percent; trajectories without steps are left out."""
    counts = Counter(position_bin(step, length, bins) for step, length in steps if length > 0)
    return [(f"{100 * i // bins}–{100 * (i + 1) // bins}%", counts.get(i, 0)) for i in range(bins)]
