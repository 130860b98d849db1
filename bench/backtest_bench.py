"""Benchmark: a 7-day backtest at a 15 s step (40,320 decisions per spec) with 2 specs, end to end
through `autoscaler backtest`: series discovery, chunked range queries to a real Prometheus
(its query time included), the replays, summary.json and the PNG.

History (backfilled with promtool before the clock starts): 6 pods of `web` counting
`http_requests_total` under a daily wave with spikes (Pods metric through `rate(...[2m])`), a
queue gauge (External metric) and kube-state-metrics' replicas. Spec 1 scales on the Pods
metric; spec 2 on both metrics with a longer scale-down window.
Goal: under 30 s on 2 cores. Writes bench/results/backtest.json.

    python bench/backtest_bench.py [--days 7]
"""

from __future__ import annotations

import argparse
import io
import json
import math
import platform
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoscaler.backtest import cli
from kubesim.adapterrules import counter_rate_rule, gauge_rule
from kubesim.prometheus import start_backfilled

GOAL = 30.0
STEP = 15
PODS = 6
NS = "shop"
RULES = {
    "rules": [counter_rate_rule('http_requests_total{namespace!="",pod!=""}', "2m")],
    "externalRules": [gauge_rule('queue_messages_ready{queue!=""}', ("namespace",))],
}


def load(t: float) -> float:
    """Requests per second in total: a daily wave, plus a 10-minute spike every 6 hours."""
    day = 86400.0
    wave = 30 + 25 * math.sin(2 * math.pi * (t % day) / day)
    spike = 60 if (t % 21600) < 600 else 0
    return wave + spike


def openmetrics(start: int, steps: int) -> str:
    lines = ["# TYPE http_requests counter"]
    for p in range(PODS):
        total = 0.0
        for i in range(steps + 10):
            t = start + (i - 10) * STEP
            total += load(t) / PODS * STEP
            lines.append(f'http_requests_total{{namespace="{NS}",pod="web-7c9d8f6b5-x2x7{p}"}} {total:.3f} {t}')
    lines.append("# TYPE queue_messages_ready gauge")
    for i in range(steps + 10):
        t = start + (i - 10) * STEP
        lines.append(f'queue_messages_ready{{namespace="{NS}",queue="orders"}} {load(t) * 4:.1f} {t}')
    lines.append("# TYPE kube_deployment_status_replicas gauge")
    for i in range(0, steps + 10, 4):
        t = start + (i - 10) * STEP
        lines.append(f'kube_deployment_status_replicas{{namespace="{NS}",deployment="web"}} {PODS} {t}')
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def spec(name: str, metrics: list, down_window: int) -> dict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 2, "maxReplicas": 40, "metrics": metrics,
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": down_window}}}}


PODS_METRIC = {"type": "Pods", "pods": {"metric": {"name": "http_requests"},
                                        "target": {"type": "AverageValue", "averageValue": "5"}}}
EXTERNAL_METRIC = {"type": "External", "external": {
    "metric": {"name": "queue_messages_ready", "selector": {"matchLabels": {"queue": "orders"}}},
    "target": {"type": "AverageValue", "averageValue": "30"}}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "backtest.json"))
    args = ap.parse_args()
    steps = int(args.days * 86400 / STEP)
    start = (int(time.time()) - int(args.days * 86400) - 3600) // STEP * STEP
    t0 = time.perf_counter()
    prom = start_backfilled(openmetrics(start, steps))
    backfill = time.perf_counter() - t0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            (d / "rules.yaml").write_text(yaml.safe_dump(RULES))
            (d / "pods.yaml").write_text(yaml.safe_dump(spec("web", [PODS_METRIC], 300)))
            (d / "both.yaml").write_text(yaml.safe_dump(spec("web", [PODS_METRIC, EXTERNAL_METRIC], 600)))
            argv = [str(d / "pods.yaml"), str(d / "both.yaml"), "--prometheus-url", prom.url, "--rules",
                    str(d / "rules.yaml"), "--from", str(start), "--to", str(start + (steps - 1) * STEP),
                    "--step", f"{STEP}s", "--report", str(d / "report"), "--no-progress"]
            out = io.StringIO()
            t1 = time.perf_counter()
            code = cli.main(argv, out, sys.stderr)
            elapsed = time.perf_counter() - t1
            if code != 0:
                print(out.getvalue())
                return 1
            summary = json.loads((d / "report" / "summary.json").read_text())
    finally:
        prom.close()
    decisions = sum(s["decisions"] for s in summary["specs"])
    result = {
        "benchmark": "backtest", "days": args.days, "step_seconds": STEP, "specs": len(summary["specs"]),
        "decisions": decisions, "seconds": round(elapsed, 2), "goal_seconds": GOAL, "met": elapsed < GOAL,
        "backfill_seconds_not_timed": round(backfill, 1), "detail": out.getvalue().strip().splitlines()[-1],
        "scale_events": [s["scaleEvents"] for s in summary["specs"]],
        "machine": platform.machine(), "python": platform.python_version(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"backtest: {args.days:g} days at {STEP}s, {len(summary['specs'])} specs, {decisions:,} decisions: "
          f"{elapsed:.1f}s (goal < {GOAL:g}s: {'met' if elapsed < GOAL else 'NOT met'}); {result['detail']}")
    print(f"  (backfill with promtool, not timed: {backfill:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
