"""Benchmark: how many autoscaler decisions per second `decide()` makes on this machine.

A realistic autoscaler: 100 pods (a few starting, one without metrics), 3 metrics (CPU
utilization, a Pods metric, an External AverageValue), behavior with 2 policies per direction,
30 past recommendations and some scale events. The spec is parsed once, as the controller does.
Goal: at least 10,000 decisions/s per CPU-second (150 times what 1,000 autoscalers at a 15 s
sync need); wall-clock figures on a shared machine are printed beside it. Writes bench/results/decision.json.

    python bench/decision_bench.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoscaler.decision import (
    ControllerConfig,
    DecisionInput,
    ExternalReading,
    History,
    PodInfo,
    PodReading,
    PodSample,
    Recommendation,
    ScaleEvent,
    decide,
    parse_spec,
)
from autoscaler.decision.engine import tolerances_for
from autoscaler.decision.normalize import normalize_with_behavior
from autoscaler.decision.sources import compute_metric

GOAL = 10_000
NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
SPEC = {
    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
    "minReplicas": 2, "maxReplicas": 300,
    "metrics": [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
        {"type": "Pods", "pods": {"metric": {"name": "http_requests"},
                                  "target": {"type": "AverageValue", "averageValue": "2"}}},
        {"type": "External", "external": {"metric": {"name": "queue_messages_ready",
                                                     "selector": {"matchLabels": {"queue": "web"}}},
                                          "target": {"type": "AverageValue", "averageValue": "30"}}},
    ],
    "behavior": {
        "scaleUp": {"stabilizationWindowSeconds": 60, "policies": [
            {"type": "Pods", "value": 10, "periodSeconds": 60}, {"type": "Percent", "value": 50, "periodSeconds": 60}]},
        "scaleDown": {"stabilizationWindowSeconds": 300, "policies": [
            {"type": "Pods", "value": 5, "periodSeconds": 60}, {"type": "Percent", "value": 10, "periodSeconds": 120}]},
    },
}


CONTROLS = {
    "fallback": {"failureThreshold": 3, "replicas": 20},
    "schedules": [
        {"name": "office", "start": "0 8 * * 1-5", "end": "0 18 * * 1-5", "timeZone": "Europe/Berlin",
         "minReplicas": 50},
        {"name": "night", "start": "0 1 * * *", "duration": "2h", "timeZone": "Europe/Berlin", "minReplicas": 20},
    ],
}


def build_input() -> DecisionInput:
    spec = parse_spec(SPEC)
    long_ago = NOW - timedelta(hours=1)
    pods, cpu, rps = [], {}, {}
    for i in range(100):
        starting = i % 25 == 0  # 4 pods still starting: inside the CPU initialization period, not Ready
        start = NOW - timedelta(seconds=45) if starting else long_ago
        pods.append(PodInfo(name=f"web-{i}", ready=not starting, ready_transition=start, start_time=start,
                            requests={"app": {"cpu": 500, "memory": 256 * 2**20 * 1000}, "proxy": {"cpu": 100}},
                            ready_condition="False" if starting else "True"))
        if i == 7:
            continue  # one pod without metrics
        cpu[f"web-{i}"] = PodSample(420 + (i * 37) % 200, NOW - timedelta(seconds=10), 30.0)
        rps[f"web-{i}"] = PodSample(2400 + (i * 53) % 900, NOW - timedelta(seconds=10), 60.0)
    history = History(
        recommendations=tuple(Recommendation(NOW - timedelta(seconds=10 * k), 100 + k % 7) for k in range(30)),
        scale_up_events=(ScaleEvent(NOW - timedelta(seconds=40), 5),),
        scale_down_events=(ScaleEvent(NOW - timedelta(seconds=100), 3),),
    )
    return DecisionInput(
        spec=spec, current_replicas=100, status_replicas=100, pods=tuple(pods),
        readings=(PodReading(cpu), PodReading(rps), ExternalReading((3_600_000, 400_000), NOW)),
        now=NOW, config=ControllerConfig(), history=history,
    )


def _per_call_us(fn, n: int = 2000) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return round(best * 1e6, 1)


def breakdown(inp: DecisionInput) -> dict[str, float]:
    """Where one decision's time goes (microseconds, best of 3)."""
    tol = tolerances_for(inp.spec, inp.config.tolerance)
    out: dict[str, float] = {}
    for ms, reading in zip(inp.spec.metrics, inp.readings, strict=True):
        out[f"metric {ms.type} {ms.name}"] = _per_call_us(lambda ms=ms, r=reading: compute_metric(ms, r, inp, tol))
    h = inp.history
    out["normalization (behavior)"] = _per_call_us(lambda: normalize_with_behavior(
        inp.spec, inp.current_replicas, 140, inp.spec.min_replicas, h.recommendations or (),
        h.scale_up_events, h.scale_down_events, inp.now, inp.config.downscale_stabilization_window))
    out["whole decide()"] = _per_call_us(lambda: decide(inp))
    # The opt-in controls (docs/controls.md): the same decision with a fallback and two schedule
    # windows (at NOW, 01:10 in Berlin, "night" is open), both evaluated with cronsim each decision.
    controlled = replace(inp, spec=parse_spec({**SPEC, **CONTROLS}))
    out["whole decide() with fallback + 2 schedules"] = _per_call_us(lambda: decide(controlled))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="measuring time per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "decision.json"))
    args = ap.parse_args()
    inp = build_input()
    d = decide(inp)
    for _ in range(200):  # warm up
        decide(inp)
    rates = []
    cpu0 = time.process_time()
    total = 0
    for _ in range(args.rounds):
        n, t0 = 0, time.perf_counter()
        deadline = t0 + args.seconds / args.rounds
        while True:
            for _ in range(100):
                decide(inp)
            n += 100
            t = time.perf_counter()
            if t >= deadline:
                break
        rates.append(n / (t - t0))
        total += n
    cpu_rate = total / (time.process_time() - cpu0)
    best, median = max(rates), statistics.median(rates)
    parts = breakdown(inp)
    result = {
        "benchmark": "decide() decisions per second",
        "scenario": {"pods": 100, "metrics": 3, "policies_per_direction": 2, "past_recommendations": 30},
        "decision": {"current": d.current_replicas, "recommendation": d.recommendation, "desired": d.desired_replicas,
                     "proposals": [p.replicas for p in d.proposals]},
        "rounds": [round(r) for r in rates],
        "median_per_s": round(median),
        "best_per_s": round(best),
        "median_us_per_decision": round(1e6 / median, 1),
        "per_cpu_second": round(cpu_rate),
        "breakdown_us": parts,
        "goal_per_s": GOAL,
        "goal_met": cpu_rate >= GOAL,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    verdict = "meets" if cpu_rate >= GOAL else "misses"
    print(f"decide(): {cpu_rate:,.0f} decisions per CPU-second, {verdict} the goal of {GOAL:,}/s  -> {out}")
    print(f"  wall clock: {median:,.0f}/s median ({1e6 / median:.1f} us each), best {best:,.0f}/s; "
          f"this decision: {d.current_replicas} -> {d.desired_replicas}, proposals {[p.replicas for p in d.proposals]}")
    for part, us in parts.items():
        print(f"  {part:<40} {us:7.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
