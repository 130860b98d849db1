"""The read path `backtest` and `tune` share: their history flags, then plan (`plan.plan_reading`:
the specs and the adapter's rules -> every PromQL), fetch (`history.Fetcher.read`), and the
`Histories` the replays read. The commands only parse their own flags, replay and print."""

from __future__ import annotations

import argparse
import functools
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

import numpy as np

from adapter.rules import RuleError, load_rules
from autoscaler.commandline import add_controller_flags, controller_config
from autoscaler.decision import ControllerConfig
from promscaler import flags
from promscaler.quantity import QuantityError, to_milli
from promscaler.times import DurationError, format_duration, parse_time

from .before import Before, had_before
from .exposure import Reference, observed_query
from .history import Fetcher, Grid, HistoryError, Series
from .plan import ForecastSetting, Plan, plan_reading
from .queries import QueryError
from .replay import _target_value, tolerance_up
from .specs import Spec

__all__ = ["Failed", "Histories", "add_history_flags", "read_histories"]

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
                   help="the per-pod load (or value) every spec's seconds under-provisioned are measured against "
                        "(default: the baseline's first metric's target; the baseline is backtest's first spec, "
                        "tune's given one)")
    p.add_argument("--reference-tolerance", type=_tolerance, metavar="SHARE",
                   help="the reference band's upper edge is target x (1 + this) (default: the baseline's scale-up "
                        "tolerance)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar while fetching history")
    add_controller_flags(p)


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r} (0.1 for 10%)") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a number, 0 or more")
    return value


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
    reference_tolerance: float | None
    plans: list[Plan]
    data: dict[str, Series]
    fetcher: Fetcher               # the Prometheus the history came from, for what the report reads besides
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

    def reference(self, baseline: Plan) -> Reference:
        """The one reference every spec's exposure is measured against: the baseline's observed
        metric, and the flags' target and tolerance, else the baseline's (`exposure.py`)."""
        query = observed_query(baseline.spec.spec, baseline.queries)
        target, tolerance = self.reference_target, self.reference_tolerance
        given = [f for f, v in (("--reference-target", target), ("--reference-tolerance", tolerance)) if v is not None]
        of = [f for f, v in (("first metric's target", target), ("scale-up tolerance", tolerance)) if v is None]
        if target is None:
            target = _target_value(query.metric, self.requests)
        if tolerance is None:
            tolerance = tolerance_up(baseline.spec.spec, self.config)
        source = " and ".join(given + ([f"{baseline.spec.label}'s {' and '.join(of)}"] if of else []))
        return Reference(query, target, tolerance, source)

    def with_forecast_bases(self) -> dict[str, Series]:
        """The history with the query each listed forecast is made of (the load it forecast, for the
        report's forecast panel), fetched over the window where the specs do not list it already."""
        bases = [q.base for p in self.plans for q in p.queries if q.forecast is not None and q.base not in self.data]
        return {**self.data, **self.fetcher.fetch(bases, self.grid)} if bases else self.data


@dataclass(frozen=True)
class _Window:
    grid: Grid
    requests: dict[str, int]
    reference_target: float | None
    reference_tolerance: float | None


def _window(args: argparse.Namespace) -> _Window:
    """The replay's grid, pod requests and reference target from the flags; raises Failed."""
    now = datetime.now(UTC)
    try:
        start = parse_when(args.start, now)
        start = start.replace(microsecond=start.microsecond // 1000 * 1000)  # Prometheus' milliseconds
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
    return _Window(grid, requests, reference_target, args.reference_tolerance)


def read_histories(args: argparse.Namespace, specs: list[Spec], err: TextIO,
                   settings: Sequence[ForecastSetting] = (), add_forecast: bool = False) -> Histories:
    """Plan (`plan_reading`: each spec's PromQL, and at other forecast `settings`; with
    `add_forecast` the first metric's forecast when the spec does not list it), then fetch
    (`Fetcher.read`: the history its forecasts read before --from, which leaves out the season
    sets it does not cover, then the rest in one pass); raises Failed."""
    window = _window(args)
    try:
        cfg = load_rules(args.rules) if args.rules else None
    except RuleError as exc:
        raise Failed(str(exc), 2) from None
    config = controller_config(args)
    fetcher = Fetcher(args.prometheus_url)
    started = time.perf_counter()
    try:
        reading = plan_reading(specs, cfg, functools.cache(fetcher.series_names), window.grid, args.namespace,
                               args.pod_regex, dict(args.query), settings, add_forecast)
        bar = _progress(not args.no_progress and err.isatty(), err)
        if bar is None:
            data, before = fetcher.read(reading)
        else:
            with bar:
                task = bar.add_task("fetch", total=None)
                data, before = fetcher.read(reading, lambda done, total: bar.update(task, completed=done, total=total))
    except RuleError as exc:
        raise Failed(str(exc), 2) from None
    except (QueryError, HistoryError) as exc:
        raise Failed(str(exc), 1) from None
    return Histories(window.grid, config, window.requests, window.reference_target, window.reference_tolerance,
                     reading.plans, data, fetcher, time.perf_counter() - started, before)

