"""`autoscaler backtest SPEC.yaml [SPEC2.yaml ...] --prometheus-url URL --from T --to T`: replay
autoscaler specs over Prometheus history and compare them.

It reads history through `read` (plan, fetch), replays each spec and writes the report.
Exit status: 0 replayed, 1 Prometheus or a metric's history failed, 2 bad input (one line each)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from autoscaler.commandline import ArgError, Parser

from .before import no_value
from .exposure import observed
from .forecasterror import checks
from .history import HistoryError
from .html import write_backtest_html
from .read import Failed, add_history_flags, read_histories
from .replay import replay, tolerance_up
from .report import Outcome, summarize, table, write_png, write_summary
from .specs import SpecFileError, load_specs

__all__ = ["main"]


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
    try:
        data = h.with_forecast_bases()
    except HistoryError as exc:
        return fail(str(exc), 1)
    started = time.perf_counter()
    outcomes = []
    baseline = h.plans[0]  # one reference for every spec: the first is the baseline
    reference = h.reference(baseline)
    load = observed(baseline.spec.spec, baseline.queries, h.data)
    for plan in h.plans:
        actual, source = h.actual(plan)
        result = replay(plan.spec.spec, plan.queries, h.data, h.grid, h.initial(args, plan), args.startup_delay,
                        h.config, h.requests)
        tolerance = tolerance_up(plan.spec.spec, h.config)
        outcomes.append(Outcome(plan.spec.label, plan.queries, result, tolerance, actual, source, reference, load,
                                checks(plan.queries, data, h.grid.step)))
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
        write_summary(summaries, report / "summary.json", reference)
        if not args.no_png:
            write_png(outcomes, report / "backtest.png")
        if not args.no_html:
            write_backtest_html(outcomes, summaries, report / "report.html")
    except OSError as exc:
        return fail(f"--report {report}: {exc.strerror or exc}", 1)
    written = time.perf_counter() - started - replayed
    for note in notes:
        print(note, file=out)
    table(summaries, out, reference, [(o.label, f) for o in outcomes for f in o.forecasts])
    print(f"fetched in {h.fetched_seconds:.1f}s, replayed {h.grid.count * len(specs)} decisions in {replayed:.1f}s, "
          f"wrote the report in {written:.1f}s; "
          f"report: {report / 'summary.json'}" + ("" if args.no_html else f", {report / 'report.html'}")
          + ("" if args.no_png else f", {report / 'backtest.png'}"), file=out)
    return 0
