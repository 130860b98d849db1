"""`autoscaler tune SPEC.yaml --prometheus-url URL --from T --to T`: the spec settings that would
have used the fewest replica-hours on this history while keeping the time under-provisioned
within a budget, chosen on one part of the range and reported on the other.

It reads history exactly as `backtest` does (the same flags, PromQL and fetch, once) and replays
each candidate with the same load model and start-up delay (`fastreplay`, the engine's decisions).
Exit status: 0 done, 1 Prometheus or a metric's history failed, 2 bad input (one line each)."""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import yaml

from adapter.rules import forecast_options
from autoscaler.commandline import ArgError, Parser
from autoscaler.decision import SpecError
from autoscaler.decision.spec import HPASpec
from promscaler import flags
from promscaler.times import format_duration

from .before import NoValue, no_value
from .exposure import Reference, observed
from .fastreplay import Prepared, fast_replay, prepare, supports
from .history import Grid, Series
from .html import write_tune_html
from .plan import RULES, ForecastSetting, Plan
from .queries import MetricQuery
from .read import Failed, Histories, add_history_flags, read_histories
from .replay import LOAD_MODEL, Replay, replay, tolerance_up
from .report import _duration
from .specs import SpecFileError, load_specs
from .tune import (
    SHAPES,
    Knobs,
    Score,
    apply,
    choose,
    evaluate,
    forecast_side,
    knobs_of,
    scale_down_side,
    scale_up_side,
    score,
)

__all__ = ["main"]


MARGIN = 0.7   # candidates are chosen within this share of the budget: room for the periods to differ
SLACK = 0.02   # within the budget, the least under-provisioned within this share of the cheapest's replica-hours


def _budget(text: str) -> float | None:
    """A share (1%, 0.01), or `given` (None): no more than the given spec."""
    return None if text.strip() == "given" else _fraction(text)


def _fraction(text: str) -> float:
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a share: {text!r} (1% or 0.01)") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be between 0% and 100%")
    return value


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="promscaler-autoscaler tune",
               description="The autoscaler settings with the fewest replica-hours on this history, within a budget "
                           "of time under-provisioned")
    p.add_argument("spec", metavar="SPEC.yaml", help="one HorizontalPodAutoscaler or HorizontalAutoscaler")
    add_history_flags(p)
    p.add_argument("--max-above-target", type=_budget, default=0.01, metavar="SHARE",
                   help="budget: the share of the time the load per ready pod may stay above the reference "
                        "target x (1 + tolerance) (default 1%%); `given`: no more than the given spec")
    p.add_argument("--choose-on", type=_fraction, default=0.5, metavar="SHARE",
                   help="the first part of the range the candidates are chosen on; the rest is held out to report "
                        "on (default 50%%)")
    p.add_argument("--seasons", nargs="+", type=_season_set, default=list(SEASONS), metavar="SEASONS",
                   help="the seasons tried for a seasonal forecast, each a set such as 7d,1d, when the history "
                        "before --from covers them (default: 1d 7d 7d,1d)")
    p.add_argument("--top", type=int, default=10, help="candidates in the table (default 10)")
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                   help="processes replaying candidates (default: 2, or 1 on one core)")
    p.add_argument("--report", default="tune-report", metavar="DIR",
                   help="where report.html, tune.json, recommended.yaml and tune.png go")
    p.add_argument("--no-png", action="store_true", help="no tune.png")
    p.add_argument("--no-html", action="store_true", help="no report.html")
    return p


@dataclass
class _Setting:
    knobs: Knobs
    raw: dict[str, Any]
    spec: HPASpec
    queries: list[MetricQuery]


HORIZONS = (120.0, 600.0)   # forecast horizons tried (seconds) beside the rule's own, with a forecast
SEASONS = ((86400.0,), (604800.0,), (604800.0, 86400.0))  # a seasonal forecast's seasons tried, when covered


def _season_set(text: str) -> tuple[float, ...]:
    """`7d,1d` -> (604800, 86400): longest first."""
    try:
        seasons = sorted({flags.duration(part) for part in text.split(",")}, reverse=True)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    if not seasons or seasons[-1] <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: seasons must be positive durations, such as 7d,1d")
    return tuple(seasons)


def _seasons_text(seasons: tuple[float, ...]) -> str:
    return ",".join(format_duration(s) for s in seasons)


def shape(name: str) -> tuple[tuple[str, object], ...]:
    """A key of SHAPES as `Forecast` fields, read by the rules file's parser (`RuleError` as it words it)."""
    return forecast_options(SHAPES[name], f"SHAPES[{name!r}]")


def settings(season_sets: Sequence[tuple[float, ...]]) -> list[ForecastSetting]:
    """The forecast settings fetched beside the rules': every horizon x season set tried, and every
    season set x shape at the rule's horizon."""
    out = [ForecastSetting(h, p) for h in (None, *HORIZONS) for p in (None, *season_sets)]
    out += [ForecastSetting(None, p, shape(name)) for p in (None, *season_sets) for name in SHAPES]
    return [s for s in out if s != RULES]


def _horizon_text(seconds: float) -> str:
    return f"{seconds / 60:g}m"


def _horizon_seconds(text: str) -> float:
    return float(text[:-1]) * 60


def _sliced(data: dict[str, Series], count: int) -> dict[str, Series]:
    return {q: Series(s.total[:count], s.count[:count]) for q, s in data.items()}


class _Search:
    """One history, the given spec, and the replays of its candidates."""

    def __init__(self, h: Histories, plan: Plan, args: argparse.Namespace, reference: Reference) -> None:
        self.h, self.plan, self.args, self.reference = h, plan, args, reference
        self.initial = h.initial(args, plan)
        # the load is read as the given spec (the baseline) reads it: a candidate changes targets, not that
        self.observed = observed(plan.spec.spec, plan.queries, h.data)
        self.split = max(1, min(h.grid.count - 1, round(h.grid.count * args.choose_on)))
        self.choose_grid = Grid(h.grid.start, h.grid.step, self.split)
        self.fast = supports(plan.spec.spec)
        self.prepared_choose: Prepared = prepare(_sliced(h.data, self.split), self.choose_grid)
        self.prepared_full: Prepared = prepare(h.data, h.grid)
        self.default_window = int(h.config.downscale_stabilization_window)

    def listed_forecast(self) -> bool:
        """Whether the spec lists a forecast metric (its PromQL changes with the horizon)."""
        base = [q.promql for q in self.plan.queries]
        return any([q.promql for q in qs] != base for qs in self.plan.variants.values())

    def horizons(self) -> list[str]:
        """The horizons (as knob values) tried with a forecast listed or added."""
        if not self.listed_forecast() and not self.plan.added:
            return []
        return list(dict.fromkeys(_horizon_text(s.horizon) for s in self.plan.variants if s.horizon is not None))

    @cached_property
    def seasons(self) -> list[str]:
        """The season sets (as knob values) tried, worked out once: those of the plan, which keeps
        only the ones whose forecast has a value from --from on (`Plan.keep_covered`), that
        change a seasonal forecast's seasons from the rule's."""
        if not self.listed_forecast() and not self.plan.added:
            return []
        rules = {q.forecast.seasons for q in (*self.plan.queries, self.plan.added.get(RULES))
                 if q is not None and q.forecast is not None}
        return [_seasons_text(s.seasons) for s in self.plan.variants
                if s.horizon is None and s.shape is None and s.seasons is not None and s.seasons not in rules
                and any(q.forecast is not None and q.forecast.method == "seasonal" for q in self.plan.at(s))]

    @cached_property
    def shapes(self) -> list[str]:
        """The shapes against noise (keys of SHAPES) tried: with a seasonal forecast listed or added,
        those that change its PromQL (a shape that does not fit the rule is not applied)."""
        if not self.listed_forecast() and not self.plan.added:
            return []
        added = self.plan.added.get(RULES)
        rules = [q.promql for q in (*self.plan.queries, *([added] if added is not None else []))]
        at = {name: ForecastSetting(None, None, shape(name)) for name in SHAPES}
        return [name for name, s in at.items() if s in self.plan.variants
                and any(q.forecast is not None and q.forecast.method == "seasonal" for q in self.plan.at(s))
                and [q.promql for q in self.plan.at(s)] != rules]

    def setting(self, knobs: Knobs) -> _Setting:
        added = self.plan.added.get(RULES)
        raw = apply(self.plan.spec.raw, knobs, added.metric.name if added else None)
        spec = self.plan.spec.parse(raw)
        at = ForecastSetting(None if knobs.horizon is None else _horizon_seconds(knobs.horizon),
                             None if knobs.seasons is None else _season_set(knobs.seasons),
                             None if knobs.shape is None else shape(knobs.shape))
        base = list(self.plan.queries if at == RULES else self.plan.variants[at])
        if knobs.forecast:
            base.append(self.plan.added[at])
        queries = [replace(q, metric=ms) for ms, q in zip(spec.metrics, base, strict=True)]
        return _Setting(knobs, raw, spec, queries)

    def replay(self, s: _Setting, full: bool) -> Replay:
        prepared = self.prepared_full if full else self.prepared_choose
        if self.fast:
            return fast_replay(s.spec, s.queries, prepared, self.initial, self.args.startup_delay, self.h.config,
                               metric_rows=False)
        data = self.h.data if full else _sliced(self.h.data, self.split)
        return replay(s.spec, s.queries, data, prepared.grid, self.initial, self.args.startup_delay, self.h.config,
                      self.h.requests)

    def no_value(self, s: _Setting) -> list[NoValue]:
        """The candidate's forecast metrics without a value over the first steps of the window."""
        return no_value(s.queries, self.h.data, self.h.grid, self.h.had_before)

    def on_choose_part(self, knobs: Knobs) -> Score:
        try:
            s = self.setting(knobs)
        except SpecError:
            return Score(float("inf"), float("inf"), 0, 0.0)
        return score(self.replay(s, False), self.reference.query, self.observed[: self.split], self.reference,
                     slice(0, self.split))

    def on_held_out(self, knobs: Knobs) -> Score:
        """The candidate replayed over the whole range, scored on the held-out part (hindsight)."""
        try:
            s = self.setting(knobs)
        except SpecError:
            return Score(float("inf"), float("inf"), 0, 0.0)
        return self.held_out(s)[0]

    def held_out(self, s: _Setting) -> tuple[Score, Replay]:
        r = self.replay(s, True)
        return score(r, self.reference.query, self.observed, self.reference, slice(self.split, None)), r


def _backtest_hint(given: str, reference: Reference) -> str:
    """How `backtest` reads the same seconds under-provisioned: with the given spec first (the
    baseline), or with the reference's flags (recommended.yaml: the one beside tune.json)."""
    return (f"backtest {Path(given).name} recommended.yaml with the same flags (the first spec is the baseline), "
            f"or any spec with {' '.join(reference.flags())}")


def _yaml(raw: dict[str, Any]) -> str:
    return yaml.safe_dump(raw, sort_keys=False)


def _knob_text(k: Knobs, given: Knobs, forecast: bool, listed: bool) -> list[str]:
    return [k.target, "given" if k.tolerance is None else f"{k.tolerance:g}",
            "given" if k.down_window is None or k == given else f"{k.down_window}s", k.down_policy, k.up_policy] + \
        (["added" if k.forecast else ("listed" if listed else "-"), k.horizon or "given", k.seasons or "given",
          k.shape or "given"] if forecast else [])


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr

    def fail(message: str, code: int) -> int:
        print(f"autoscaler tune: {message}", file=err)
        return code

    started = time.perf_counter()
    try:
        args = _parser().parse_args(list(argv) if argv is not None else None)
        specs = load_specs(args.spec, args.kubernetes_version)
        if len(specs) != 1:
            raise SpecFileError(f"{args.spec}: tune takes one autoscaler, the file has {len(specs)}")
        if (specs[0].spec.controls is not None and specs[0].spec.controls.composite is not None
                and specs[0].spec.metrics[0].type != "External"):
            raise SpecFileError(f"{args.spec}: spec.advanced.scalingModifiers: tune chooses the composite target "
                                "only when no cpu/memory trigger has a containerName (its metric sorts first)")
        if args.top < 1 or args.workers < 1:
            raise ArgError("--top and --workers: must be at least 1")
        h = read_histories(args, specs, err, settings(args.seasons), add_forecast=True)
    except (ArgError, SpecFileError) as exc:
        return fail(str(exc), 2)
    except Failed as exc:
        return fail(str(exc), exc.code)
    if h.grid.count < 4:
        return fail("--from/--to: too short a range to choose on one part and report on another", 2)
    fetched = time.perf_counter() - started
    plan = h.plans[0]
    reference = h.reference(plan)  # the given spec is the baseline, as backtest's first spec
    search = _Search(h, plan, args, reference)
    given = knobs_of(plan.spec.raw, search.default_window)
    step = h.grid.step
    choose_seconds = search.split * step
    held_seconds = (h.grid.count - search.split) * step
    workers = args.workers if search.fast else 1
    share = args.max_above_target
    candidates, scores, budget = _staged(search, given, search.on_choose_part, workers,
                                         lambda given_s: given_s if share is None else share * choose_seconds,
                                         MARGIN, SLACK)
    ranked = choose(scores, budget * MARGIN, given, SLACK)
    replayed = time.perf_counter() - started - fetched
    best_knobs = ranked[0][0]
    table_rows = _distinct(ranked, args.top)
    shown = {k: search.setting(k) for k in dict.fromkeys([given, best_knobs, *(k for k, _ in table_rows)])}
    given_setting, best_setting = shown[given], shown[best_knobs]
    held: dict[Knobs, tuple[Score, Replay]] = {k: search.held_out(s) for k, s in shown.items()}
    given_held, best_held = held[given][0], held[best_knobs][0]
    held_budget = given_held.seconds_under if share is None else share * held_seconds
    verdict, recommended = _verdict(given_held, best_held, held_budget, best_knobs == given)
    chosen = best_setting if recommended else given_setting
    hindsight_started = time.perf_counter()
    hindsight = _hindsight(search, given, candidates, workers, held_budget)
    hind_seconds = time.perf_counter() - hindsight_started
    total = time.perf_counter() - started

    no_values = {k: search.no_value(s) for k, s in shown.items()}

    def gaps(k: Knobs) -> list[dict[str, Any]]:
        return [g.row() for g in no_values[k]]

    def when(i: int) -> str:
        return h.grid.at(i).isoformat().replace("+00:00", "Z")

    summary: dict[str, Any] = {
        "spec": plan.spec.label,
        "from": when(0), "to": when(h.grid.count - 1), "stepSeconds": step,
        "chosenOn": {"from": when(0), "to": when(search.split - 1)},
        "reportedOn": {"from": when(search.split), "to": when(h.grid.count - 1)},
        "objective": (f"the fewest replica-hours with the load per ready pod above {reference.target:g} x "
                      f"(1 + {reference.tolerance:g}) ({reference.metric}) "
                      + ("no longer than with the given spec" if share is None
                         else f"at most {share:.2%} of the time")),
        "reference": {**reference.row(), "text": reference.text(), "flags": reference.flags(),
                      "backtest": _backtest_hint(args.spec, reference)},
        "budgetShare": share, "budgetSeconds": {"chosenOn": budget, "reportedOn": held_budget}, "margin": MARGIN,
        "slack": SLACK,
        "loadModel": LOAD_MODEL, "startupDelaySeconds": args.startup_delay,
        "engine": "fast_replay (the engine's decisions, tested step for step)" if search.fast else "replay (decide())",
        "candidates": len(candidates),
        "seconds": {"fetch": round(fetched, 2), "search": round(replayed, 2), "hindsight": round(hind_seconds, 2),
                    "total": round(total, 2)},
        "fetchedBefore": [row for _, row in h.fetched_before()],
        "seasonsTried": search.seasons,
        "given": {"knobs": given.row(), "chosenOn": ranked_score(scores, given).row(), "reportedOn": given_held.row(),
                  "noValue": gaps(given)},
        "best": {"knobs": best_knobs.row(), "chosenOn": ranked[0][1].row(), "reportedOn": best_held.row(),
                 "noValue": gaps(best_knobs)},
        "recommended": recommended,
        "verdict": verdict,
        "hindsightBest": _hindsight_row(hindsight, held[best_knobs if recommended else given][0], held_budget),
        "top": [{"knobs": k.row(), "chosenOn": s.row(), "reportedOn": held[k][0].row(), "noValue": gaps(k)}
                for k, s in table_rows],
        "all": [{"knobs": k.row(), "chosenOn": s.row()} for k, s in scores],
    }
    given_doc, chosen_doc = plan.spec.written(plan.spec.raw), plan.spec.written(chosen.raw)  # a ScaledObject stays one
    report = Path(args.report)
    try:
        report.mkdir(parents=True, exist_ok=True)
        (report / "tune.json").write_text(json.dumps(_finite(summary), indent=2) + "\n")
        (report / "recommended.yaml").write_text(_yaml(chosen_doc))
        if not args.no_png:
            _png(report / "tune.png", scores, given, best_knobs, budget, held, search, reference)
        if not args.no_html:
            write_tune_html(_finite(summary), _yaml(given_doc), _yaml(chosen_doc), report / "report.html")
    except OSError as exc:
        return fail(f"--report {report}: {exc.strerror or exc}", 1)
    _print(out, summary, table_rows, held, given, scores, given_doc, chosen_doc, search, budget, held_budget,
           no_values)
    return 0


def _staged(search: _Search, given: Knobs, run: Callable[[Knobs], Score], workers: int,
            budget_of: Callable[[float], float], margin: float,
            slack: float = 0.0) -> tuple[list[Knobs], list[tuple[Knobs, Score]], float]:
    """The staged grid (`tune`'s module docstring) scored by `run`: (candidates, scores, budget),
    `budget_of(the given spec's seconds under-provisioned)` the budget, chosen within `margin` of it
    with `choose`'s `slack`."""
    candidates = scale_down_side(given, search.reference.target)
    scores = evaluate(candidates, run, workers)
    budget = budget_of(ranked_score(scores, given).seconds_under)
    if search.plan.added:
        more = forecast_side(choose(scores, budget * margin, given, slack)[0][0], given, search.reference.target,
                             search.horizons(), search.seasons, search.shapes)
        candidates += more
        scores += evaluate(more, run, workers)
    leaders = [k for k, _ in choose(scores, budget * margin, given, slack)[:3]]
    more = scale_up_side(leaders, tolerance_up(search.plan.spec.spec, search.h.config), search.horizons(),
                         search.listed_forecast(), search.seasons, search.shapes)
    candidates += more
    scores += evaluate(more, run, workers)
    return candidates, scores, budget


@dataclass
class _Hindsight:
    knobs: Knobs
    score: Score
    candidates: int


def _hindsight(search: _Search, given: Knobs, tried: Sequence[Knobs], workers: int, budget: float) -> _Hindsight:
    """The best of tune's own search space in hindsight: the same staged grid scored on the
    held-out part (each candidate replayed over the whole range), plus every candidate the choice
    tried, chosen under the same constraint (the held-out budget, no margin)."""
    candidates, scores, _ = _staged(search, given, search.on_held_out, workers, lambda _: budget, 1.0)
    seen = set(candidates)
    more = [k for k in dict.fromkeys(tried) if k not in seen]
    scores += evaluate(more, search.on_held_out, workers)
    best, score_ = choose(scores, budget, given)[0]
    return _Hindsight(best, score_, len(scores))


def _hindsight_row(h: _Hindsight, recommended: Score, budget: float) -> dict[str, Any]:
    """tune.json's `hindsightBest`: that spec, its figures on the held-out part, and how far the
    recommendation (or the given spec, when none is recommended) is from it in replica-hours."""
    above = recommended.replica_hours / h.score.replica_hours - 1 if h.score.replica_hours > 0 else None
    return {"knobs": h.knobs.row(), "reportedOn": h.score.row(), "candidates": h.candidates,
            "withinBudget": h.score.seconds_under <= budget,
            "recommendedReplicaHoursAbove": None if above is None else round(above, 4)}


def _distinct(ranked: Sequence[tuple[Knobs, Score]], top: int) -> list[tuple[Knobs, Score]]:
    """The best `top` with distinct outcomes (equal replays show once: the smallest change)."""
    seen: set[Score] = set()
    out = []
    for k, s in ranked:
        if s not in seen:
            seen.add(s)
            out.append((k, s))
            if len(out) == top:
                break
    return out


def _finite(value: Any) -> Any:
    """The summary with non-finite numbers (a candidate that could not be scored) as null: JSON has
    no Infinity, and `json.dumps` never asks `default` about floats."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value

def ranked_score(scores: Sequence[tuple[Knobs, Score]], knobs: Knobs) -> Score:
    return next(s for k, s in scores if k == knobs)


def _verdict(given: Score, best: Score, budget: float, same: bool) -> tuple[str, bool]:
    """Whether the choice holds on the held-out part: within the budget there (or no worse than
    the given spec), and fewer replica-hours or less time under-provisioned than it."""
    if same:
        return "the given spec is already the best candidate: nothing to change", False
    within = best.seconds_under <= max(budget, given.seconds_under)
    saves = best.replica_hours < given.replica_hours or (best.seconds_under < given.seconds_under
                                                         and best.replica_hours <= given.replica_hours)
    if within and saves:
        return "the choice holds on the held-out part: recommended", True
    if not within:
        return ("on the held-out part the choice is under-provisioned beyond the budget (and more than the given "
                "spec): not recommended; keep the given spec"), False
    return "on the held-out part the choice saves nothing: not recommended; keep the given spec", False


def _print(out: TextIO, summary: dict[str, Any], rows: Sequence[tuple[Knobs, Score]],
           held: dict[Knobs, tuple[Score, Replay]], given: Knobs, scores: Sequence[tuple[Knobs, Score]],
           given_raw: dict[str, Any], chosen_raw: dict[str, Any], search: _Search, budget: float,
           held_budget: float, no_values: dict[Knobs, list[NoValue]]) -> None:
    from rich.console import Console
    from rich.table import Table

    tty = hasattr(out, "isatty") and out.isatty()
    console = Console(file=out, highlight=False, markup=False, width=None if tty else 200)
    p = console.print
    p(f"tune {summary['spec']}: {summary['candidates']} candidates over {summary['from']} .. {summary['to']}, "
      f"step {summary['stepSeconds']:g}s")
    p(f"objective: {summary['objective']}")
    p(f"{summary['reference']['text']}; to read the same in backtest: {summary['reference']['backtest']}")
    p(f"against over-fitting: chosen on {summary['chosenOn']['from']} .. {summary['chosenOn']['to']} "
      f"(budget {_duration(budget)}, chosen within {MARGIN:.0%} of it; within {SLACK:.0%} of the cheapest, the "
      "least under-provisioned), "
      f"reported on {summary['reportedOn']['from']} .. {summary['reportedOn']['to']} "
      f"(held out, budget {_duration(held_budget)})")
    for line, _ in search.h.fetched_before():
        p(line)
    for which, k in (("given", given), ("best", rows[0][0])):
        for g in no_values[k]:
            p(f"{which}: {g.text()}: there it scales up on its other metrics and never down (a metric "
              "without a value blocks a scale-down, as in Kubernetes)")
    p(f"limits: the same load model and start-up delay ({summary['startupDelaySeconds']:g}s) as backtest: "
      f"{summary['loadModel']}; the searched knobs only (target, tolerance, scale-down window and policy, "
      "scale-up policy, adding the first metric's forecast when its rule declares one, the forecast's horizon, "
      "seasons and shape)")
    t = Table(box=None, pad_edge=False, padding=(0, 1))
    heads = ["", "target", "tolerance", "down window", "down policy", "up policy"]
    forecast, listed = bool(search.horizons()), search.listed_forecast()
    if forecast:
        heads += ["forecast", "horizon", "seasons", "shape"]
    for head in heads:
        t.add_column(head)
    for head in ("replica-h", "under-prov.", "events", "| held out: replica-h", "under-prov.", "events"):
        t.add_column(head, justify="right")

    def add(label: str, k: Knobs, s: Score) -> None:
        hs = held[k][0]
        t.add_row(label, *_knob_text(k, given, forecast, listed), f"{s.replica_hours:.1f}",
                  _duration(s.seconds_under), str(s.scale_events), f"{hs.replica_hours:.1f}",
                  _duration(hs.seconds_under), str(hs.scale_events))

    add("given", given, ranked_score(scores, given))
    for i, (k, s) in enumerate(rows):
        add(str(i + 1), k, s)
    p(t)
    ideal = held[given][0].ideal_replica_hours
    p(f"ideal on the held-out part (observed load / reference target): {ideal:.1f} replica-hours")
    p(summary["verdict"])
    p(hindsight_text(summary["hindsightBest"], summary["recommended"]), soft_wrap=True)
    diff = list(difflib.unified_diff(_yaml(given_raw).splitlines(), _yaml(chosen_raw).splitlines(),
                                     "given", "recommended", lineterm="", n=2))
    horizon = summary["best"]["knobs"]["forecastHorizon"]
    if summary["recommended"] and horizon:
        p(f"rules file: set forecast.horizon to {horizon} on the forecast rule of this spec's forecast metric")
    shape_name = summary["best"]["knobs"]["forecastShape"]
    if summary["recommended"] and shape_name:
        fields = ", ".join(f"{k}: {v}" for k, v in SHAPES[shape_name].items())
        p(f"rules file: set forecast {fields} on the forecast rule of this spec's forecast metric")
    seasons = summary["best"]["knobs"]["forecastSeasons"]
    if summary["recommended"] and seasons:
        p(f"rules file: set forecast.seasons to [{seasons.replace(',', ', ')}] on the forecast rule of this spec's "
          "forecast metric")
    p("recommended spec:" if summary["recommended"] else "the given spec (unchanged):")
    p(_yaml(chosen_raw).rstrip(), soft_wrap=True)
    if diff:
        p("difference from the given spec:")
        p("\n".join(diff), soft_wrap=True)
    secs = summary["seconds"]
    p(f"fetched in {secs['fetch']:.1f}s, {summary['candidates']} candidates replayed in {secs['search']:.1f}s "
      f"({summary['engine']}), {secs['total']:.1f}s in all; report: {search.args.report}/tune.json, "
      "recommended.yaml" + ("" if search.args.no_html else ", report.html")
      + ("" if search.args.no_png else ", tune.png"))


def hindsight_text(row: dict[str, Any], recommended: bool) -> str:
    """One line: the hindsight best of the search space and the recommendation's distance to it."""
    knobs = ", ".join(f"{k} {v}" for k, v in row["knobs"].items()
                      if v is not None and v is not False and v != "given") or "as given"
    fig = row["reportedOn"]
    which = "the recommendation" if recommended else "the given spec (kept)"
    above = row["recommendedReplicaHoursAbove"]
    distance = "" if above is None else f"; {which} is {above:+.1%} in replica-hours from it"
    budget = "" if row["withinBudget"] else " (none within the budget: the least under-provisioned)"
    return (f"hindsight: the best of this search space on the held-out part, under the same budget, "
            f"{row['candidates']} candidates{budget}: {knobs}: {fig['replicaHours']:.1f} replica-hours, "
            f"{_duration(fig['secondsUnderProvisioned'])} under-provisioned{distance}")


def _png(path: Path, scores: Sequence[tuple[Knobs, Score]], given: Knobs, best: Knobs, budget: float,
         held: dict[Knobs, tuple[Score, Replay]], search: _Search, reference: Reference) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    finite = [(k, s) for k, s in scores if np.isfinite(s.replica_hours)]
    xs = [s.seconds_under / 60 for _, s in finite]
    ys = [s.replica_hours for _, s in finite]
    ax.scatter(xs, ys, s=10, color="tab:gray", alpha=0.6, label="candidates")
    g, b = ranked_score(scores, given), ranked_score(scores, best)
    ax.scatter([g.seconds_under / 60], [g.replica_hours], marker="X", s=80, color="black", label="given", zorder=3)
    ax.scatter([b.seconds_under / 60], [b.replica_hours], marker="*", s=160, color="tab:red", label="best", zorder=3)
    ax.axvline(budget / 60, color="tab:red", linestyle=":", linewidth=1, label="budget")
    ax.set_xscale("symlog", linthresh=max(budget / 60, 1.0))
    ax.set_xlabel("minutes under-provisioned (chosen-on part)")
    ax.set_ylabel("replica-hours (chosen-on part)")
    ax.set_title("every candidate: the trade-off", fontsize=10)
    ax.legend(fontsize=8)
    grid_, split = search.h.grid, search.split
    times = (grid_.times[split:] * 1000).astype("datetime64[ms]")
    ideal = search.observed[split:] / reference.target
    every = max(1, len(times) // 3000)
    ax2.plot(times[::every], ideal[::every], color="tab:gray", linewidth=0.6, label="observed load / reference target")
    for k, color, label in ((given, "black", "given"), (best, "tab:red", "best")):
        r = held[k][1]
        ax2.step(times[::every], r.replicas[split:][::every], where="post", color=color, linewidth=0.9, label=label)
    ax2.set_title("held-out part: replicas", fontsize=10)
    ax2.set_ylabel("replicas")
    ax2.legend(fontsize=8)
    for label in ax2.get_xticklabels():
        label.set_rotation(30)
        label.set_fontsize(8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
