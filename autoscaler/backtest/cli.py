"""`autoscaler backtest SPEC.yaml [SPEC2.yaml ...] --prometheus-url URL --from T --to T`: replay
autoscaler specs over Prometheus history and compare them.

Exit status: 0 replayed, 1 Prometheus or a metric's history failed, 2 bad input (one line each)."""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from autoscaler.commandline import ArgError, Parser, add_controller_flags, controller_config
from promscaler import flags
from promscaler.quantity import QuantityError, to_milli
from promscaler.times import DurationError, parse_time

from .history import Fetcher, Grid, HistoryError
from .queries import QueryError, actual_replicas_queries, load_compiled, metric_query
from .replay import replay, tolerance_up
from .report import Outcome, summarize, table, write_png, write_summary
from .specs import SpecFileError, load_specs

__all__ = ["main", "parse_when"]

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

def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="promscaler-autoscaler backtest",
               description="What would these autoscaler specs have done over this history?")
    p.add_argument("specs", nargs="+", metavar="SPEC.yaml", help="HorizontalPodAutoscaler or HorizontalAutoscaler YAML")
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
    p.add_argument("--pod-regex", help="the target's pod names in history (default: <target name>-.*)")
    p.add_argument("--startup-delay", type=flags.duration, default=30.0, metavar="DURATION",
                   help="from a scale-up to the new pods being ready (default 30s)")
    p.add_argument("--initial-replicas", type=int,
                   help="replicas at --from (default: the actual ones, else minReplicas)")
    p.add_argument("--pod-requests", type=flags.key_value, action="append", default=[], metavar="RESOURCE=QUANTITY",
                   help="each simulated pod's requests, for Utilization targets (cpu=500m)")
    p.add_argument("--report", default="backtest-report", metavar="DIR", help="where the PNG and summary.json go")
    p.add_argument("--no-png", action="store_true", help="write summary.json only")
    p.add_argument("--no-progress", action="store_true", help="no progress bar while fetching history")
    add_controller_flags(p)
    return p

def _progress(enabled: bool, err: TextIO) -> Any:
    """A rich progress bar on stderr, or nothing."""
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("fetching history"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(file=err), transient=True)

def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr

    def fail(message: str, code: int) -> int:
        print(f"autoscaler backtest: {message}", file=err)
        return code

    try:
        args = _parser().parse_args(list(argv) if argv is not None else None)
    except ArgError as exc:
        return fail(str(exc), 2)
    now = datetime.now(UTC)
    try:
        start = parse_when(args.start, now).replace(microsecond=0)
        end = parse_when(args.end, now)
    except ValueError as exc:
        return fail(f"--from/--to: {exc}", 2)
    if args.step <= 0:
        return fail("--step: must be positive", 2)
    if end < start:
        return fail("--to: before --from", 2)
    try:
        requests = {k: to_milli(v) for k, v in args.pod_requests}
    except QuantityError as exc:
        return fail(f"--pod-requests: {exc}", 2)
    try:
        specs = [s for path in args.specs for s in load_specs(path)]
        rules = load_compiled(args.rules) if args.rules else None
    except (SpecFileError, QueryError) as exc:
        return fail(str(exc), 2)
    config = controller_config(args)
    grid = Grid(start, args.step, math.floor((end - start).total_seconds() / args.step) + 1)
    fetcher = Fetcher(args.prometheus_url)
    explicit = dict(args.query)
    names: dict[str, list[str]] = {}

    def series_names(series_query: str) -> list[str]:
        if series_query not in names:
            names[series_query] = fetcher.series_names(series_query)
        return names[series_query]

    started = time.perf_counter()
    try:
        plans = []
        for s in specs:
            ns = args.namespace or s.namespace or "default"
            ref = s.spec.scale_target_ref
            pod_regex = args.pod_regex or f"{re.escape(ref.name)}-.*"
            queries = [metric_query(ms, ns, pod_regex, rules, series_names, explicit) for ms in s.spec.metrics]
            actual_qs = actual_replicas_queries(ns, s.name, ref.kind, ref.name)
            plans.append((s, queries, actual_qs))
        wanted = [q.promql for _, qs, _ in plans for q in qs] + [a for _, _, acts in plans for a in acts]
        bar = _progress(not args.no_progress and err.isatty(), err)
        if bar is not None:
            with bar:
                task = bar.add_task("fetch", total=None)
                data = fetcher.fetch(wanted, grid, lambda done, total: bar.update(task, completed=done, total=total))
        else:
            data = fetcher.fetch(wanted, grid)
    except (QueryError, HistoryError) as exc:
        return fail(str(exc), 1)
    fetched = time.perf_counter() - started
    outcomes = []
    for s, queries, actual_queries in plans:
        actual: np.ndarray | None = None
        source: str | None = None
        for a in actual_queries:
            if data[a].count.any():
                actual, source = data[a].total, a
                break
        initial = args.initial_replicas
        if initial is None:
            known = actual[np.isfinite(actual)] if actual is not None else np.array([])
            first = actual[0] if actual is not None else math.nan
            initial = int(first) if math.isfinite(first) else (int(known[0]) if known.size else s.spec.min_replicas)
        initial = min(max(initial, s.spec.min_replicas), s.spec.max_replicas) if initial > 0 else initial
        result = replay(s.spec, queries, data, grid, initial, args.startup_delay, config, requests)
        outcomes.append(Outcome(s.label, queries, result, tolerance_up(s.spec, config), actual, source))
    replayed = time.perf_counter() - started - fetched
    summaries = [summarize(o) for o in outcomes]
    report = Path(args.report)
    try:
        report.mkdir(parents=True, exist_ok=True)
        write_summary(summaries, report / "summary.json")
        if not args.no_png:
            write_png(outcomes, report / "backtest.png")
    except OSError as exc:
        return fail(f"--report {report}: {exc.strerror or exc}", 1)
    written = time.perf_counter() - started - fetched - replayed
    table(summaries, out)
    print(f"fetched in {fetched:.1f}s, replayed {grid.count * len(specs)} decisions in {replayed:.1f}s, "
          f"wrote the report in {written:.1f}s; "
          f"report: {report / 'summary.json'}" + ("" if args.no_png else f", {report / 'backtest.png'}"), file=out)
    return 0
