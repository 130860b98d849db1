"""`python -m autoscaler demo`: both used-by cases, end to end, on this machine, in two minutes.

Starts the sandbox (or uses a real cluster with `--kubeconfig`), samples what the autoscalers
see and do once a second, shows it live, and writes a report directory at the end or on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import shutil
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live

from autoscaler.demo import report, view
from autoscaler.demo.monitor import Monitor
from autoscaler.demo.sandbox import Sandbox, StartupError
from autoscaler.demo.scenario import WORKLOADS, Timings
from promscaler import logs
from promscaler.kubeapi import Kube, load_configuration
from promscaler.times import format_time

if TYPE_CHECKING:
    from autoscaler.demo.cluster import ClusterStage

SAMPLE_INTERVAL = 1.0
LOG_EVERY = 5.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="promscaler-autoscaler demo", description=__doc__.split("\n\n")[0],
                                formatter_class=logs.HelpFormatter)
    logs.add_version_flag(p, "promscaler-autoscaler")
    p.add_argument("--duration", type=float, default=120.0, metavar="SECONDS",
                   help="how long to run, in seconds (the load profile stretches to fit; the shortest allowed "
                        f"depends on --time-scale: {min_duration(Timings()):.0f} at 1, "
                        f"{min_duration(Timings().scaled(2)):.0f} at 2)")
    p.add_argument("--no-tui", action="store_true", help="plain log lines instead of the live view (default: false)")
    p.add_argument("--report", default="report", metavar="DIR", help="where to write summary.json and timeline.png")
    p.add_argument("--kubeconfig", metavar="FILE",
                   help="run against a real cluster (see examples/README.md) instead of the sandbox; default: "
                        "the sandbox ($KUBECONFIG and ~/.kube/config are not consulted: the demo drives a real "
                        "cluster only when asked)")
    p.add_argument("--time-scale", type=float, default=1.0, metavar="FACTOR",
                   help="run every compressed timing (scrapes, sync period, windows) this many times faster "
                        "still, with the load profile to match; >1 on a fast machine or in tests")
    opts = p.parse_args(argv)
    if not 1 <= opts.time_scale <= 4:
        p.error("--time-scale: between 1 and 4 (below 250ms scrapes Prometheus cannot keep up)")
    shortest = min_duration(Timings().scaled(opts.time_scale))
    if opts.kubeconfig is None and not opts.duration >= shortest:
        p.error(f"--duration: at least {shortest:.0f} seconds at --time-scale {opts.time_scale:g} "
                f"(a scale-up, and a scale-down back to the minimum, need that long)")
    if opts.kubeconfig is not None and not opts.duration >= 60:
        p.error("--duration: at least 60 seconds (a scale-up and a scale-down need that long)")
    if opts.kubeconfig and not Path(opts.kubeconfig).is_file():
        p.error(f"--kubeconfig: no such file: {opts.kubeconfig}")
    return opts


def min_duration(timings: Timings) -> float:
    """Long enough for each load profile's active part (at least 30 s at scale 1) before its recovery."""
    active = 30.0 * timings.sync_period / Timings().sync_period
    return math.ceil(active + max(timings.web_recovery, timings.worker_recovery))


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(run(parse_args(argv)))


def _install_signal_handlers() -> dict[str, Any]:
    """SIGINT/SIGTERM/SIGHUP cancel the demo (once); cleanup and the report follow in `finally`."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    got: dict[str, Any] = {}

    def on_signal(sig: signal.Signals) -> None:
        if not got:
            got["signal"] = sig.name
            got["code"] = 128 + int(sig)
            if task is not None:
                task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, on_signal, sig)
    return got


async def sample_loop(monitor: Monitor, duration: float, clock, console: Console, no_tui: bool, render_args,
                      check=lambda: None) -> None:
    """Sample once a second until `duration`; show it live or as log lines."""
    printed = {w.name: 0 for w in WORKLOADS}
    next_log = 0.0

    def show_plain() -> None:
        nonlocal next_log
        for w in WORKLOADS:  # each change once, in order, as soon as its reason is known
            changes = monitor.changes[w.name]
            while printed[w.name] < len(changes) and changes[printed[w.name]].reason:
                print(view.change_line(w.name, changes[printed[w.name]]), flush=True)
                printed[w.name] += 1
        if t >= next_log:
            for w in WORKLOADS:
                if w.name in monitor.latest:
                    print(view.log_line(w, monitor.latest[w.name]), flush=True)
            next_log = t + LOG_EVERY

    live = None if no_tui else Live(console=console, refresh_per_second=4, transient=False)
    try:
        if live:
            live.start()
        while True:
            t = clock()
            if t >= duration:
                break
            check()
            await monitor.sample(t)
            if live:
                live.update(view.render(WORKLOADS, monitor.latest, monitor.changes, t, duration, render_args,
                                        console.width, console.height))
            else:
                show_plain()
            await asyncio.sleep(max(0.0, t + SAMPLE_INTERVAL - clock()))
    finally:
        if live:
            live.stop()


async def run(opts: argparse.Namespace) -> int:
    console = Console()
    say = ((lambda line: print(line, flush=True)) if opts.no_tui
           else (lambda line: console.print(f"[dim]•[/dim] {line}")))
    got = _install_signal_handlers()
    timings = Timings().scaled(opts.time_scale)
    report_dir = Path(opts.report).resolve()
    log_dir = report_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="promscaler-demo-"))
    stage: ClusterStage | Sandbox
    started_at = datetime.now(UTC)
    if opts.kubeconfig:
        from autoscaler.demo.cluster import ClusterStage

        stage = ClusterStage(opts.kubeconfig, opts.duration, workdir, log_dir, say)
        say("promscaler demo on a real cluster: the two example workloads, driven through the demo's load profiles")
    else:
        stage = Sandbox(timings, opts.duration, workdir, log_dir, say)
        say("promscaler demo: real Prometheus, the adapter and the controller against an in-process Kubernetes API")
    for line in stage.lines():
        say(line)
    kube: Kube | None = None
    monitor: Monitor | None = None
    error: str | None = None
    try:
        await stage.start()
        kube = Kube(await load_configuration(stage.kubeconfig))
        monitor = Monitor(kube, WORKLOADS, stage.load_of, stage.truth_of)
        t0 = stage.t0
        await sample_loop(monitor, opts.duration, lambda: time.monotonic() - t0, console, opts.no_tui,
                          stage.lines(), stage.check_alive)
    except asyncio.CancelledError:
        say(f"{got.get('signal', 'cancelled')}: stopping and writing the report")
    except StartupError as exc:
        error = str(exc)
    except Exception as exc:  # one line for the user; the details are in the logs
        error = f"{type(exc).__name__}: {exc}"
    finally:
        processes = stage.processes()
        try:
            await asyncio.shield(stage.stop())
        finally:
            if kube is not None:
                await kube.close()
            shutil.rmtree(workdir, ignore_errors=True)
    sampled = monitor is not None and any(monitor.timeline.values())
    if monitor is not None and sampled:  # also after a failure mid-run: what happened until then is worth a look
        write_report(report_dir, monitor, stage, timings, opts, started_at, processes,
                     interrupted=got.get("signal") or error)
        print(f"report: {report_dir / 'timeline.png'}\n        {report_dir / 'summary.json'}\n"
              f"        logs in {log_dir}")
    if error:
        print(f"demo failed: {error}", file=sys.stderr)
        print(f"logs: {log_dir}", file=sys.stderr)
        return 1
    if not sampled:
        print("demo stopped before the first sample; no report written", file=sys.stderr)
        return got.get("code", 1)
    return got.get("code", 0)


def write_report(report_dir: Path, monitor: Monitor, stage, timings: Timings, opts, started_at,
                 processes, interrupted: str | None) -> None:
    monitor.finish()
    load_changes = {name: profile.changes() for name, profile in stage.profiles.items()}
    settings = ({**{k: getattr(timings, k) for k in timings.__dataclass_fields__}, "description": stage.lines()}
                if stage.mode == "sandbox" else {"description": stage.lines()})
    meta = {
        "started_at": format_time(started_at), "duration": opts.duration, "interrupted": interrupted,
        "mode": stage.mode, "settings": settings, "processes": processes, "workdir": str(stage.workdir),
    }
    summary = report.summarize(WORKLOADS, monitor.timeline, monitor.changes, load_changes, timings.tolerance, meta)
    report.write_summary(report_dir / "summary.json", summary)
    where = "the sandbox" if stage.mode == "sandbox" else "a real cluster"
    report.plot(report_dir / "timeline.png", WORKLOADS, monitor.timeline, monitor.changes, load_changes,
                timings.tolerance, f"promscaler demo, {format_time(started_at)}: both used-by cases on {where}")
