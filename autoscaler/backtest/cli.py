"""`autoscaler backtest SPEC.yaml [SPEC2.yaml ...] --prometheus-url URL --from T --to T`: replay
autoscaler specs over Prometheus history and compare them.

Exit status: 0 replayed, 1 Prometheus or a metric's history failed, 2 bad input (one line each)."""

from __future__ import annotations

import argparse
import functools
import math
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from adapter.rules import RuleError, load_rules
from autoscaler.commandline import ArgError, Parser, add_controller_flags, controller_config
from autoscaler.decision import ControllerConfig
from promscaler import flags
from promscaler.quantity import QuantityError, to_milli
from promscaler.times import DurationError, format_duration, parse_time

from .before import Before, before_grid, had_before, needed, no_value
from .exposure import Reference, observed_query, reference_for
from .history import Fetcher, Grid, HistoryError, Series
from .html import write_backtest_html
from .plan import ForecastSetting, Plan, make_plans
from .queries import QueryError
from .replay import _target_value, replay, tolerance_up
from .report import Outcome, summarize, table, write_png, write_summary
from .specs import Spec, SpecFileError, load_specs

__all__ = ["Failed", "Histories", "Plan", "add_history_flags", "main", "parse_when", "read_histories"]

_RELATIVE = re.compile(r"^now(?:\s*-\s*(\d+(?:\.\d+)?)(d|h|m|s))?$")

def parse_when(text: str, now: datetime) -> datetime:
    """RFC 3339, Unix seconds, `now`, or `now-7d` / `now-6h` / `now-30m`."""
    m = _RELATIVE.match(text.strip())
    if m:
        if not m.group(1):
            return now
        unit = {"d": 86400, "h": 3600, "m": 60, "s": 1}[m.group(2)]
        return now - timedelta(seconds=float(m.group(1)) * unit)
    try:
        return datetime.fromtimestamp(float(text), UTC)
    except ValueError:
        pass
    try:
        return parse_time(text)
    except DurationError:
        raise ValueError(f"not a time: {text!r} (RFC 3339, Unix seconds, now or now-7d)") from None

def add_history_flags(p: argparse.ArgumentParser) -> None:
    """The flags backtest and tune share: where the history is, how each metric's PromQL is made,
    the load model's start-up delay and the controller's settings."""
    p.add_argument("--prometheus-url", required=True,
                   help="the Prometheus (or compatible) server with the history (required)")
    p.add_argument("--from", dest="start", required=True, metavar="TIME",
                   help="start of the replay: RFC 3339, Unix seconds, now-7d (required)")
    p.add_argument("--to", dest="end", default="now", metavar="TIME", help="end of the replay, as --from")
    p.add_argument("--step", type=flags.duration, default=15.0, metavar="DURATION",
                   help="decision interval: the controller's sync period (default 15s)")
    p.add_argument("--rules", metavar="RULES.yaml", help="the adapter's rules file: each metric's PromQL comes from it")
    p.add_argument("--query", action="append", type=flags.key_value, default=[], metavar="METRIC=PROMQL",
                   help="a metric's PromQL given explicitly (per-pod series for Pods/Resource metrics)")
    p.add_argument("-n", "--namespace", help="namespace of the specs (default: each spec's, else default)")
    p.add_argument("--pod-regex", help="the target's pod names in history (default: every pod its controller ever "
                                       "named, by Kubernetes' naming: web-[a-z0-9]+-[a-z0-9]+ for Deployment web)")
    p.add_argument("--startup-delay", type=flags.duration, default=30.0, metavar="DURATION",
                   help="from a scale-up to the new pods being ready (default 30s)")
    p.add_argument("--initial-replicas", type=int,
                   help="replicas at --from (default: the actual ones, else minReplicas)")
    p.add_argument("--pod-requests", type=flags.key_value, action="append", default=[], metavar="RESOURCE=QUANTITY",
                   help="each simulated pod's requests, for Utilization targets (cpu=500m)")
    p.add_argument("--reference-target", metavar="QUANTITY",
                   help="the per-pod load (or value) the seconds under-provisioned are measured against "
                        "(default: the spec's first metric's target)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar while fetching history")
    add_controller_flags(p)


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="promscaler-autoscaler backtest",
               description="What would these autoscaler specs have done over this history?")
    p.add_argument("specs", nargs="+", metavar="SPEC.yaml", help="HorizontalPodAutoscaler or HorizontalAutoscaler YAML")
    add_history_flags(p)
    p.add_argument("--report", default="backtest-report", metavar="DIR",
                   help="where report.html, summary.json and the PNG go")
    p.add_argument("--no-png", action="store_true", help="no backtest.png")
    p.add_argument("--no-html", action="store_true", help="no report.html")
    return p

def _progress(enabled: bool, err: TextIO) -> Any:
    """A rich progress bar on stderr, or nothing."""
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("fetching history"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(file=err), transient=True)

class Failed(Exception):
    """A one-line error and the exit status (1: Prometheus or history, 2: bad input)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Histories:
    """Everything a replay needs, read once: the grid, the specs' queries and every series."""

    grid: Grid
    config: ControllerConfig
    requests: dict[str, int]
    reference_target: float | None
    plans: list[Plan]
    data: dict[str, Series]
    fetched_seconds: float
    before: list[tuple[Before, Grid, Series]] = field(default_factory=list)  # what forecasts read before --from

    def had_before(self, base: str) -> float:
        """Seconds of history before --from Prometheus has for the query `base` (forecasts are made of it)."""
        return had_before(self.before, base)

    def fetched_before(self) -> list[tuple[str, dict[str, Any]]]:
        """Each query forecasts are made of, fetched before --from: a line to print, a JSON row."""
        out = []
        for b, grid, series in self.before:
            had = min(b.had(series, grid), b.seconds)
            of = "all of it" if had >= b.seconds else ("none of it" if not had else f"{format_duration(had)} of it")
            out.append((f"fetched {format_duration(b.seconds)} of history before --from for the forecast of "
                        f"{', '.join(b.metrics)} (Prometheus has {of})",
                        {"metrics": list(b.metrics), "fetchedSeconds": b.seconds, "hadSeconds": had}))
        return out

    def actual(self, plan: Plan) -> tuple[np.ndarray | None, str | None]:
        """The cluster's replicas (kube-state-metrics), when Prometheus has them."""
        for a in plan.actual_queries:
            if self.data[a].count.any():
                return self.data[a].total, a
        return None, None

    def initial(self, args: argparse.Namespace, plan: Plan) -> int:
        """--initial-replicas, else the actual replicas at --from, else minReplicas; within bounds."""
        spec, actual = plan.spec.spec, self.actual(plan)[0]
        initial = args.initial_replicas
        if initial is None:
            known = actual[np.isfinite(actual)] if actual is not None else np.array([])
            first = actual[0] if actual is not None else math.nan
            initial = int(first) if math.isfinite(first) else (int(known[0]) if known.size else spec.min_replicas)
        return min(max(initial, spec.min_replicas), spec.max_replicas) if initial > 0 else initial

    def reference(self, plan: Plan, tolerance: float) -> Reference:
        query = observed_query(plan.queries)
        target = self.reference_target
        if target is None:
            target = _target_value(query.metric, self.requests)
        return reference_for(query, target, tolerance)


@dataclass(frozen=True)
class _Window:
    grid: Grid
    requests: dict[str, int]
    reference_target: float | None


def _window(args: argparse.Namespace) -> _Window:
    """The replay's grid, pod requests and reference target from the flags; raises Failed."""
    now = datetime.now(UTC)
    try:
        start = parse_when(args.start, now).replace(microsecond=0)
        end = parse_when(args.end, now)
    except ValueError as exc:
        raise Failed(f"--from/--to: {exc}", 2) from None
    if args.step <= 0:
        raise Failed("--step: must be positive", 2)
    if end < start:
        raise Failed("--to: before --from", 2)
    try:
        requests = {k: to_milli(v) for k, v in args.pod_requests}
    except QuantityError as exc:
        raise Failed(f"--pod-requests: {exc}", 2) from None
    reference_target = None
    if args.reference_target is not None:
        try:
            reference_target = to_milli(args.reference_target) / 1000.0
        except QuantityError as exc:
            raise Failed(f"--reference-target: {exc}", 2) from None
        if reference_target <= 0:
            raise Failed("--reference-target: must be positive", 2)
    grid = Grid(start, args.step, math.floor((end - start).total_seconds() / args.step) + 1)
    return _Window(grid, requests, reference_target)


def read_histories(args: argparse.Namespace, specs: list[Spec], err: TextIO,
                   settings: Sequence[ForecastSetting] = (), add_forecast: bool = False) -> Histories:
    """Plan (each spec's PromQL, and at other forecast `settings`; with `add_forecast` the first
    metric's forecast when the spec does not list it), fetch the history its forecasts read before
    --from, leave out the season sets that history does not cover (`Plan.keep_covered`), then fetch
    the rest in one pass; raises Failed."""
    window = _window(args)
    try:
        cfg = load_rules(args.rules) if args.rules else None
    except RuleError as exc:
        raise Failed(str(exc), 2) from None
    config = controller_config(args)
    fetcher = Fetcher(args.prometheus_url)
    started = time.perf_counter()
    try:
        plans = make_plans(specs, cfg, functools.cache(fetcher.series_names), args.namespace, args.pod_regex,
                           dict(args.query), settings, add_forecast)
        before = []
        for b in needed(q for p in plans for q in p.every_query()):
            grid = before_grid(window.grid, b.seconds)
            before.append((b, grid, fetcher.fetch([b.base], grid)[b.base]))
        for p in plans:
            p.keep_covered(functools.partial(had_before, before))
        wanted = [q for p in plans for q in p.promql()]
        bar = _progress(not args.no_progress and err.isatty(), err)
        if bar is not None:
            with bar:
                task = bar.add_task("fetch", total=None)
                data = fetcher.fetch(wanted, window.grid,
                                     lambda done, total: bar.update(task, completed=done, total=total))
        else:
            data = fetcher.fetch(wanted, window.grid)
    except RuleError as exc:
        raise Failed(str(exc), 2) from None
    except (QueryError, HistoryError) as exc:
        raise Failed(str(exc), 1) from None
    return Histories(window.grid, config, window.requests, window.reference_target, plans, data,
                     time.perf_counter() - started, before)


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr

    def fail(message: str, code: int) -> int:
        print(f"autoscaler backtest: {message}", file=err)
        return code

    try:
        args = _parser().parse_args(list(argv) if argv is not None else None)
        specs = [s for path in args.specs for s in load_specs(path, args.kubernetes_version)]
        h = read_histories(args, specs, err)
    except ArgError as exc:
        return fail(str(exc), 2)
    except SpecFileError as exc:
        return fail(str(exc), 2)
    except Failed as exc:
        return fail(str(exc), exc.code)
    started = time.perf_counter()
    outcomes = []
    for plan in h.plans:
        actual, source = h.actual(plan)
        result = replay(plan.spec.spec, plan.queries, h.data, h.grid, h.initial(args, plan), args.startup_delay,
                        h.config, h.requests)
        tolerance = tolerance_up(plan.spec.spec, h.config)
        outcomes.append(Outcome(plan.spec.label, plan.queries, result, tolerance, actual, source,
                                h.reference(plan, tolerance), h.data[observed_query(plan.queries).promql].total))
    replayed = time.perf_counter() - started
    summaries = [summarize(o) for o in outcomes]
    fetched_before = h.fetched_before()
    notes = [line for line, _ in fetched_before]
    for plan, s in zip(h.plans, summaries, strict=True):
        gaps = no_value(plan.queries, h.data, h.grid, h.had_before)
        notes += [f"{plan.spec.label}: {g.text()}" for g in gaps]
        if fetched_before or gaps:
            s["forecastHistory"] = {"fetchedBefore": [row for _, row in fetched_before],
                                    "noValue": [g.row() for g in gaps]}
    report = Path(args.report)
    try:
        report.mkdir(parents=True, exist_ok=True)
        write_summary(summaries, report / "summary.json")
        if not args.no_png:
            write_png(outcomes, report / "backtest.png")
        if not args.no_html:
            write_backtest_html(outcomes, summaries, report / "report.html")
    except OSError as exc:
        return fail(f"--report {report}: {exc.strerror or exc}", 1)
    written = time.perf_counter() - started - replayed
    for note in notes:
        print(note, file=out)
    table(summaries, out)
    print(f"fetched in {h.fetched_seconds:.1f}s, replayed {h.grid.count * len(specs)} decisions in {replayed:.1f}s, "
          f"wrote the report in {written:.1f}s; "
          f"report: {report / 'summary.json'}" + ("" if args.no_html else f", {report / 'report.html'}")
          + ("" if args.no_png else f", {report / 'backtest.png'}"), file=out)
    return 0
