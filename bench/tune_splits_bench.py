"""Benchmark: does `tune`'s choice hold on the period after the one it was chosen on, and how far is
it from the best of its own search space there (hindsight), over many splits of one history, with
and without the slack (`tune.choose`: within the budget, the least under-provisioned candidate within
2% of the cheapest one's replica-hours)?

The real traces of `real_traces_bench.py` (the same scaling, backfill, reference and conservative
spec, `--max-above-target given`): the history is fetched once, as `tune` fetches it (weeks 1-4,
with what the forecasts read before), and every candidate `tune` would try is replayed once over
the four weeks, as tune replays them for its held-out figures, and scored day by day. Each split
then chooses on its first days exactly as `tune` does (the staged search, `MARGIN`, the slack),
checks the choice on the next days as `tune`'s verdict does (within the given spec's seconds
under-provisioned there and fewer replica-hours, else the given spec is kept), and finds the
hindsight best there (the same staged search scored on those days, plus every candidate tried).
Splits: the tune bench's own (days 1-14 | 15-28), a week on the next week (three), 10 days on the
next 10 or 8, and days 8-21 | 22-28.

Writes bench/results/tune-splits.json.

    python bench/tune_splits_bench.py --traces nyc_departures bank_calls
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoscaler.backtest import read, tunecli
from autoscaler.backtest.specs import load_specs
from autoscaler.backtest.tune import Knobs, Score, choose, score
from autoscaler.decision import SpecError
from bench.real_traces_bench import BURSTY, STEP, backfilled
from bench.tune_bench import REFERENCE

DAY = 86400
SPLITS = (((0, 14), (14, 28)), ((0, 7), (7, 14)), ((7, 14), (14, 21)), ((14, 21), (21, 28)),
          ((0, 10), (10, 20)), ((10, 20), (20, 28)), ((7, 21), (21, 28)))


class Days:
    """Each candidate's replay over the whole range, scored day by day (replica-hours, seconds
    under-provisioned, scale events), once."""

    def __init__(self, search: tunecli._Search) -> None:
        self.search = search
        self.per_day = int(DAY // search.h.grid.step)
        self.count = search.h.grid.count // self.per_day
        self.rows: dict[Knobs, np.ndarray] = {}

    def of(self, k: Knobs) -> np.ndarray:
        if k not in self.rows:
            s = self.search
            try:
                r = s.replay(s.setting(k), True)
            except SpecError:          # a candidate tune cannot score (tune scores it inf too)
                self.rows[k] = np.full((self.count, 3), np.inf)
                return self.rows[k]
            parts = [score(r, s.reference.query, s.observed, s.reference,
                           slice(i * self.per_day, (i + 1) * self.per_day)) for i in range(self.count)]
            self.rows[k] = np.array([[p.replica_hours, p.seconds_under, p.scale_events] for p in parts])
        return self.rows[k]

    def scorer(self, days: tuple[int, int]) -> Callable[[Knobs], Score]:
        def run(k: Knobs) -> Score:
            a = self.of(k)[days[0]:days[1]].sum(axis=0)
            return Score(float(a[0]), float(a[1]), int(a[2]) if np.isfinite(a[2]) else 0, 0.0)
        return run


def split(days: Days, given: Knobs, chosen_on: tuple[int, int], judged_on: tuple[int, int],
          slack: float) -> dict[str, Any]:
    """One split, as tune chooses, checks and finds the hindsight best."""
    s = days.search
    tried, scores, budget = tunecli._staged(s, given, days.scorer(chosen_on), 1, lambda g: g, tunecli.MARGIN, slack)
    pick = choose(scores, budget * tunecli.MARGIN, given, slack)[0][0]
    judge = days.scorer(judged_on)
    g, p = judge(given), judge(pick)
    kept = pick == given or not (p.seconds_under <= g.seconds_under and p.replica_hours < g.replica_hours)
    candidates, hind_scores, _ = tunecli._staged(s, given, judge, 1, lambda _: g.seconds_under, 1.0)
    seen = set(candidates)
    hind_scores += [(k, judge(k)) for k in dict.fromkeys(tried) if k not in seen]
    best = choose(hind_scores, g.seconds_under, given)[0][1]
    final = g if kept else p

    def figures(x: Score) -> dict[str, float]:
        return {"replicaHours": round(x.replica_hours, 1), "secondsUnderProvisioned": x.seconds_under}
    return {"chosenOn": f"days {chosen_on[0] + 1}-{chosen_on[1]}",
            "judgedOn": f"days {judged_on[0] + 1}-{judged_on[1]}",
            "slack": slack, "kept": kept, "choice": pick.row(), "choice_judged": figures(p),
            "given_judged": figures(g), "hindsight_best": figures(best),
            "saved": round(1 - final.replica_hours / g.replica_hours, 4),
            "from_hindsight": round(final.replica_hours / best.replica_hours - 1, 4)}


def measure(name: str, slacks: tuple[float, ...]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        setup = backfilled(name, Path(tmp))
        try:
            argv = [str(setup.files["conservative"]), "--prometheus-url", setup.prom.url, "--rules", str(setup.rules),
                    "--from", str(setup.week1), "--to", str(setup.end), "--step", f"{STEP}s", "--startup-delay",
                    "90s", "--initial-replicas", "10", "--reference-target", f"{REFERENCE:g}",
                    "--max-above-target", "given", "--no-progress"]
            args = tunecli._parser().parse_args(argv)
            t0 = time.perf_counter()
            specs = load_specs(args.spec, args.kubernetes_version)
            h = read.read_histories(args, specs, io.StringIO(), tunecli.settings(args.seasons), add_forecast=True)
            fetched = time.perf_counter() - t0
        finally:
            setup.prom.close()
    plan = h.plans[0]
    search = tunecli._Search(h, plan, args, h.reference(plan))
    given = tunecli.knobs_of(plan.spec.raw, search.default_window)
    days = Days(search)
    rows = [split(days, given, a, b, s) for s in slacks for a, b in SPLITS]
    return {"trace": setup.out["trace"], "fetch_seconds": round(fetched, 1), "candidates_replayed": len(days.rows),
            "splits": rows}


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", nargs="+", default=["nyc_departures", "bank_calls", "elecdemand", "mpls_stops"],
                    choices=["bank_calls", "elecdemand", *BURSTY])
    ap.add_argument("--slacks", nargs="+", type=float, default=[0.0, tunecli.SLACK])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "tune-splits.json"))
    args = ap.parse_args()
    started = time.perf_counter()
    results = {}
    for name in args.traces:
        results[name] = measure(name, tuple(args.slacks))
        for r in results[name]["splits"]:
            print(f"{name} slack {r['slack']:g} {r['chosenOn']} -> {r['judgedOn']}: "
                  f"{'given kept' if r['kept'] else 'recommended'}, {r['saved']:.1%} fewer replica-hours, "
                  f"{r['from_hindsight']:+.1%} from the hindsight best", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": "tune's choice over splits", "traces": results,
                               "seconds": round(time.perf_counter() - started, 1),
                               "load_average_at_end": os.getloadavg()[0]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
