"""The learned step critic on Who&When, cross-validated by task, next to the heuristic judge
and a uniform-random baseline computed in the same run (issue 8).

    python bench/critic.py [--data ../shared/data/who-and-when/algorithm-generated]
                           [--encoder minilm|hashing] [--folds 5] [--seeds 0 1 2] [--json]

No database: the logs are read with the importer's own parser (curation/formats/who_and_when.py,
so step indices are the dataset's `mistake_step` indices) and fed to the critic in the shape
the judges get. For each seed the tasks are dealt into k folds; every trajectory is scored by
a critic trained on the other folds (which chooses its own embedding components, L2 strength
and temperature by an inner cross-validation on those folds only). Printed per seed and as the
mean over seeds: first-critical-step accuracy (exact, within one, within three), agent
accuracy, and calibration; with bootstrap 95% intervals for the first seed.

Baselines, same trajectories: the heuristic judge (workers/backends/heuristic.py, told the run
failed, as Who&When runs all did); uniform random over the steps (exact expectations, not a
draw); and the step most often critical in the training folds (what position alone gives).

Timings: fitting per fold (inner search included), scoring per trajectory with the embeddings
cached, and with a cold cache (the encoder run on CPU, or the GPU when there is one).
Embeddings are cached in var/critic-bench/ so a second run encodes nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from curation.formats import who_and_when  # noqa: E402
from workers.backends import heuristic  # noqa: E402
from workers.critic import training  # noqa: E402
from workers.critic.encoder import ENCODERS, make_encoder  # noqa: E402
from workers.judging.evaluation import Label, evaluate  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "who-and-when" / "algorithm-generated"
PAPER = {"step_exact": 0.142, "agent": 0.535}  # Who&When's best method, as issue 8 quotes it
COLD_SAMPLE = 10


def load(folder: Path) -> list[training.Example]:
    examples = []
    for path in sorted(folder.glob("*.json"), key=lambda p: (len(p.stem), p.stem)):
        record = who_and_when.parse(json.loads(path.read_text()), str(path))
        steps = [
            {
                "index": i,
                "role": s["role"],
                "name": s.get("name", ""),
                "content": s.get("content") or "",
                "reasoning": "",
                "tool_calls": [],
                "tool_call_id": "",
            }
            for i, s in enumerate(record["steps"])
        ]
        labels = record["labels"]
        trajectory = {
            "steps": steps,
            "task": {"instruction": record["task"]["instruction"]},
            "outcome": {"success": False},
        }
        examples.append(
            training.Example(
                record["id"],
                record["task"]["id"],
                trajectory,
                int(labels["first_critical_step"]),
                labels.get("agent") or "",
            )
        )
    return examples


def rates(judged: dict[Any, Label], examples: list[training.Example]) -> dict[str, Any]:
    reference = {e.key: Label("failure", e.step, "", e.agent) for e in examples}
    report = evaluate(judged, reference)
    return {
        "step_exact": report.step_exact.as_dict(),
        "step_within_one": report.step_within_one.as_dict(),
        "step_within_three": report.step_within_three.as_dict(),
        "agent": report.agent.as_dict(),
    }


def heuristic_baseline(examples: list[training.Example]) -> dict[str, Any]:
    judged = {}
    for e in examples:
        reply = heuristic.answer({"question": "judge", "trajectory": e.trajectory})
        judged[e.key] = Label("", reply["first_critical_step"], "", reply["responsible_agent"])
    return rates(judged, examples)


def uniform_baseline(examples: list[training.Example]) -> dict[str, float]:
    """Expected accuracies of a step drawn uniformly from each trajectory's steps."""

    def expected(within: int) -> float:
        hits = [
            sum(abs(k - e.step) <= within for k in range(len(e.trajectory["steps"])))
            / len(e.trajectory["steps"])
            for e in examples
        ]
        return sum(hits) / len(hits)

    named = [e for e in examples if e.agent]
    agent = [
        sum((s.get("name") or "").casefold() == e.agent.casefold() for s in e.trajectory["steps"])
        / len(e.trajectory["steps"])
        for e in named
    ]
    return {
        "step_exact": expected(0),
        "step_within_one": expected(1),
        "step_within_three": expected(3),
        "agent": sum(agent) / len(agent),
    }


def prior_baseline(examples: list[training.Example], folds: int, seed: int) -> dict[str, Any]:
    """The step index most often critical in the training folds (capped at each run's end)."""
    judged = {}
    tasks = [e.task for e in examples]
    for part in training.task_folds(tasks, folds, seed):
        held = set(part)
        common = Counter(e.step for i, e in enumerate(examples) if i not in held).most_common(1)
        step = common[0][0]
        for i in part:
            e = examples[i]
            at = min(step, len(e.trajectory["steps"]) - 1)
            judged[e.key] = Label("", at, "", e.trajectory["steps"][at].get("name") or "")
    return rates(judged, examples)


def cold_seconds(examples: list[training.Example], encoder_name: str) -> float:
    """Encoding and scoring seconds per trajectory with nothing cached."""
    sample = [e.trajectory for e in examples[:COLD_SAMPLE]]
    encoder = make_encoder(encoder_name, None)
    encoder.encode(["warm up: load the model"])
    started = time.perf_counter()
    training.encode(sample, encoder)
    return (time.perf_counter() - started) / len(sample)


def rate(measure: dict[str, Any]) -> str:
    low, high = measure.get("low"), measure.get("high")
    interval = f" [{low:5.1%}, {high:5.1%}]" if low is not None else ""
    return f"{measure['rate']:6.1%}{interval}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--encoder", choices=ENCODERS, default="minilm")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--cache", type=Path, default=ROOT / "var" / "critic-bench")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    examples = load(args.data)
    encoder = make_encoder(args.encoder, args.cache / f"embeddings-{args.encoder}.sqlite3")
    started = time.perf_counter()
    training.encode([e.trajectory for e in examples], encoder)  # fills the cache
    first_encode_s = time.perf_counter() - started

    runs = []
    for seed in args.seeds:
        settings = training.Settings(encoder=args.encoder, seed=seed)
        predictions, timing = training.cross_validate(examples, encoder, settings, args.folds)
        runs.append({"seed": seed, **training.measure(predictions, examples), **timing})
    keys = ("step_exact", "step_within_one", "step_within_three", "agent")
    mean = {k: statistics.mean(r[k]["rate"] for r in runs) for k in keys}
    spread = {k: statistics.pstdev(r[k]["rate"] for r in runs) for k in keys}
    out = {
        "data": str(args.data),
        "trajectories": len(examples),
        "tasks": len({e.task for e in examples}),
        "folds": args.folds,
        "encoder": args.encoder,
        "critic": {"per_seed": runs, "mean": mean, "sd": spread},
        "heuristic": heuristic_baseline(examples),
        "uniform_random": uniform_baseline(examples),
        "most_common_step": prior_baseline(examples, args.folds, args.seeds[0]),
        "paper_best": PAPER,
        "seconds": {
            "encode_all_first_run": round(first_encode_s, 2),
            "fit_per_fold": statistics.mean(r["fit_s_per_fold"] for r in runs),
            "score_per_trajectory_cached": statistics.mean(
                r["score_s_per_trajectory"] for r in runs
            ),
            "score_per_trajectory_cold": cold_seconds(examples, args.encoder),
        },
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print_report(out, args)


def print_report(out: dict[str, Any], args: argparse.Namespace) -> None:
    first = out["critic"]["per_seed"][0]
    print(
        f"Who&When {Path(out['data']).name}: {out['trajectories']} failed runs, {out['tasks']} "
        f"tasks; {out['folds']}-fold cross-validation by task, seeds {args.seeds}, "
        f"encoder {out['encoder']}\n"
    )
    header = f"{'':28}{'step exact':>24}{'within one':>24}{'within three':>24}{'agent':>24}"
    print(header)
    for run in out["critic"]["per_seed"]:
        cells = "".join(f"{rate(run[k]):>24}" for k in ("step_exact", "step_within_one"))
        cells += "".join(f"{rate(run[k]):>24}" for k in ("step_within_three", "agent"))
        print(f"{'critic, seed ' + str(run['seed']):28}{cells}")
    mean, sd = out["critic"]["mean"], out["critic"]["sd"]
    print(
        f"{'critic, mean ± sd of seeds':28}"
        + "".join(f"{f'{mean[k]:.1%} ± {sd[k]:.1%}':>24}" for k in mean)
    )
    for name, key in (
        ("heuristic judge", "heuristic"),
        ("most common step (prior)", "most_common_step"),
    ):
        row = out[key]
        print(f"{name:28}" + "".join(f"{rate(row[k]):>24}" for k in mean))
    uniform = out["uniform_random"]
    print(f"{'uniform random (expected)':28}" + "".join(f"{uniform[k]:>24.1%}" for k in mean))
    paper = out["paper_best"]
    print(
        f"{'paper, best method':28}{paper['step_exact']:>24.1%}{'':>24}{'':>24}"
        f"{paper['agent']:>24.1%}"
    )
    calibration = first["calibration"]
    s = out["seconds"]
    print(
        f"\ncalibration (seed {first['seed']}): mean confidence "
        f"{calibration['mean_confidence']:.1%} for an exact-step accuracy of "
        f"{calibration['accuracy']:.1%}, ECE "
        f"{calibration['ece']:.3f}, log-loss {calibration['log_loss']:.3f}"
    )
    print(
        f"time: fit {s['fit_per_fold']:.2f} s a fold (inner search included); scoring "
        f"{1000 * s['score_per_trajectory_cached']:.1f} ms a trajectory with cached embeddings, "
        f"{1000 * s['score_per_trajectory_cold']:.0f} ms cold (encoder run); first run's "
        f"encoding of everything {s['encode_all_first_run']:.1f} s"
    )


if __name__ == "__main__":
    main()
