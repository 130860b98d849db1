"""Benchmark: forecast metrics and `tune` on a realistic two-week history, measured by `backtest`'s
exposure (seconds under-provisioned: the observed load per ready pod above the reference target
x 1.1) and replica-hours.

History (three weeks, generated, then backfilled with promtool into a real Prometheus before any
clock starts; week 0 only gives the forecast of week 1 its history): a web Deployment's requests
per second, with a daily cycle (low at 04:00, high at 16:00 UTC), a
weekly one (weekends at 60%), slow multiplicative noise, and a steep spike (x2 within a minute,
for 20 minutes) at 09:00 UTC on weekdays. The pods that served it come from a simple reactive
scaler (every minute, to a target of 32/s per pod; down after 5 minutes lower), are ready 60-120 s
after creation, and count `http_requests_total` (scraped every 30 s; the adapter's rule takes
`rate(...[2m])`). The rule declares a seasonal forecast (season 7d, horizon 5m).

Measured (reference: 40 requests/s per pod, the load one pod carries, x (1 + 0.1) for every spec,
as tune judges them; start-up delay 90 s):
(a) on week 2, the HPA default spec (target 40) against the same spec plus the forecast metric
    at the same target: goal at most half the seconds under-provisioned, at most 10% more
    replica-hours;
(b) `tune` of a conservative spec (target 28, 30-minute scale-down window, 1 pod per 10 minutes
    down), chosen on week 1 and reported on week 2 (`--choose-on 50%`), then the given and the
    recommended spec measured by `backtest` on week 2: goal at least 20% fewer replica-hours at no
    more seconds under-provisioned, and within 10% of the ideal replica-hours (the observed load /
    40, integrated) inside the 1% budget;
(c) tune's speed: at least 100 candidates over 7 days at a 15 s step in under 2 minutes on 2 cores,
    Prometheus time included (the run of (b): 14 days fetched, candidates replayed over week 1,
    the best replayed over both), and the range queries it sent (Prometheus' own counter).
Writes bench/results/tune.json and docs/forecast-and-tune-benchmark.png.

    python bench/tune_bench.py
    python bench/tune_bench.py --quick --before-days 0.5   # (c) alone, on a history too short for 1d

`--quick` runs (c) alone (one tune, the 1% budget; no backtests, no plot); `--before-days` sets the
history before week 1 (default 7: week 0), so that fewer season sets are covered.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoscaler.backtest import cli, read, tunecli
from autoscaler.backtest.tune import SHAPES
from bench.adapter_bench import prometheus_queries
from kubesim.adapterrules import counter_rate_rule
from kubesim.prometheus import start_backfilled

STEP = 15            # the decision step (sync period)
SCRAPE = 30          # the counters' scrape interval
DAYS = 14
NS = "shop"
REFERENCE = 40.0     # requests/s one pod carries
TOLERANCE = 0.1      # the reference band's: the given specs' scale-up tolerance (the HPA's default)
PEAK = 800.0         # weekday afternoon requests/s
SPEED_GOAL = 120.0
SAFE = "bcdfghjklmnpqrstvwxz2456789"
RULES = {"rules": [{**counter_rate_rule('http_requests_total{namespace!="",pod!=""}', "2m"),
                    "forecast": {"method": "seasonal", "season": "7d", "horizon": "5m"}}]}


def load(t: float) -> float:
    """Requests per second at Unix time t, before noise."""
    day = (t % 86400) / 3600.0
    weekday = time.gmtime(t).tm_wday < 5
    daily = 0.2 + 0.8 * (1 - math.cos(2 * math.pi * (day - 4) / 24)) / 2
    base = PEAK * daily * (1.0 if weekday else 0.6)
    if weekday and 9.0 <= day < 9.0 + 20 / 60:
        rise = min(1.0, (day - 9.0) * 60)            # within a minute
        base *= 1 + rise
    elif weekday and 9.0 + 20 / 60 <= day < 9.0 + 22 / 60:
        base *= 1 + (9.0 + 22 / 60 - day) * 30      # down within two minutes
    return base


def history(start: int, end: int, seed: int = 7, rate: Any = load) -> str:
    """OpenMetrics text: per-pod request counters of the pods a reactive scaler ran for `rate(t)`
    requests per second."""
    rng = random.Random(seed)
    noise, pods, serial = 0.0, [], 0       # pods: [name, ready_at, count]
    lines = ["# TYPE http_requests_total counter"]
    last_up, low_since = -1e18, None

    def name() -> str:
        nonlocal serial
        serial += 1
        return "web-7c9d8f6b5-" + "".join(rng.choice(SAFE) for _ in range(5))

    for _ in range(4):
        pods.append([name(), start - 3600, 0.0])
    for t in range(start - 600, end + SCRAPE, SCRAPE):
        noise = 0.97 * noise + rng.gauss(0, 0.01)
        rps = rate(t) * (1 + noise)
        if t % 60 == 0:   # the reactive scaler that ran in this history
            want = max(2, math.ceil(rps / 32))
            if want > len(pods):
                for _ in range(want - len(pods)):
                    pods.append([name(), t + rng.uniform(60, 120), 0.0])
                last_up, low_since = t, None
            elif want < len(pods):
                low_since = t if low_since is None else low_since
                if t - low_since >= 300 and t - last_up >= 300:
                    del pods[want:]
                    low_since = None
            else:
                low_since = None
        ready = [p for p in pods if p[1] <= t]
        for p in ready:
            p[2] += rps / len(ready) * SCRAPE
        for p in pods:
            lines.append(f'http_requests_total{{namespace="{NS}",pod="{p[0]}"}} {p[2]:.1f} {t}')
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def spec(name: str, target: float, forecast: bool = False, behavior: dict | None = None) -> dict:
    metrics = [{"type": "Pods", "pods": {"metric": {"name": "http_requests"},
                                         "target": {"type": "AverageValue", "averageValue": f"{target:g}"}}}]
    if forecast:
        metrics.append({"type": "Pods", "pods": {"metric": {"name": "http_requests_forecast"},
                                                 "target": {"type": "AverageValue", "averageValue": f"{target:g}"}}})
    out: dict[str, Any] = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                           "metadata": {"name": name, "namespace": NS},
                           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                                    "minReplicas": 2, "maxReplicas": 80, "metrics": metrics}}
    if behavior:
        out["spec"]["behavior"] = behavior
    return out


CONSERVATIVE = {"scaleDown": {"stabilizationWindowSeconds": 1800,
                              "policies": [{"type": "Pods", "value": 1, "periodSeconds": 600}]}}


def backtest(files: list[Path], url: str, rules: Path, start: int, end: int, report: Path,
             step: int = STEP) -> list[dict]:
    out = io.StringIO()
    code = cli.main([*map(str, files), "--prometheus-url", url, "--rules", str(rules), "--from", str(start),
                     "--to", str(end), "--step", f"{step}s", "--startup-delay", "90s", "--reference-target",
                     f"{REFERENCE:g}", "--reference-tolerance", f"{TOLERANCE:g}", "--initial-replicas", "10",
                     "--report", str(report), "--no-progress"],
                    out, sys.stderr)
    if code != 0:
        raise SystemExit(f"backtest failed: {out.getvalue()}")
    print(out.getvalue())
    return json.loads((report / "summary.json").read_text())["specs"]


def tune_and_check(key: str, budget: str, files: dict[str, Path], url: str, rules: Path, start: int, end: int,
                   week2: int, d: Path, results: Path, step: int = STEP, rules_doc: dict = RULES,
                   check: bool = True) -> dict:
    """tune over both parts (chosen on the first, from `start` to `week2`), then (with `check`) backtest
    the given and the recommended spec on the second (from `week2`)."""
    out = io.StringIO()
    ranged = prometheus_queries(url, "/api/v1/query_range")
    t1 = time.perf_counter()
    code = tunecli.main([str(files["conservative"]), "--prometheus-url", url, "--rules", str(rules),
                         "--from", str(start), "--to", str(end), "--step", f"{step}s", "--startup-delay",
                         "90s", "--initial-replicas", "10", "--reference-target", f"{REFERENCE:g}",
                         "--max-above-target", budget, "--choose-on", "50%", "--report", str(d / key),
                         "--no-progress"], out, sys.stderr)
    elapsed = time.perf_counter() - t1
    ranged = prometheus_queries(url, "/api/v1/query_range") - ranged
    print(out.getvalue())
    if code != 0:
        raise SystemExit(f"tune failed ({code})")
    tune = json.loads((d / key / "tune.json").read_text())
    results.mkdir(parents=True, exist_ok=True)
    (results / f"tune-{key}.json").write_text(json.dumps({k: v for k, v in tune.items() if k != "all"}, indent=2))
    speed = {"candidates": tune["candidates"], "seconds": round(elapsed, 1), "split": tune["seconds"],
             "engine": tune["engine"], "range_queries": ranged, "seasons_tried": tune["seasonsTried"]}
    if not check:
        return speed
    files[f"tuned-{key}"] = d / f"tuned-{key}.yaml"
    files[f"tuned-{key}"].write_text((d / key / "recommended.yaml").read_text())
    tuned_rules = rules
    knobs = tune["best"]["knobs"] if tune["recommended"] else {}
    if knobs.get("forecastHorizon") or knobs.get("forecastSeasons") or knobs.get("forecastShape"):  # into the rules
        first = rules_doc["rules"][0]
        forecast = {**first["forecast"]}
        if knobs.get("forecastHorizon"):
            forecast["horizon"] = knobs["forecastHorizon"]
        if knobs.get("forecastSeasons"):
            forecast.pop("season", None)
            forecast["seasons"] = knobs["forecastSeasons"].split(",")
        if knobs.get("forecastShape"):
            forecast.update(SHAPES[knobs["forecastShape"]])
        tuned_rules = d / f"rules-{key}.yaml"
        tuned_rules.write_text(yaml.safe_dump({**rules_doc, "rules": [{**first, "forecast": forecast},
                                                                      *rules_doc["rules"][1:]]}))
    [given] = backtest([files["conservative"]], url, rules, week2, end, d / f"{key}-given", step)
    [tuned] = backtest([files[f"tuned-{key}"]], url, tuned_rules, week2, end, d / f"{key}-tuned", step)
    g, t = figures(given), figures(tuned)
    ideal = tune["given"]["reportedOn"]["idealReplicaHours"]
    return {"rules": tuned_rules, "budget": budget, "knobs": tune["best"]["knobs"], "recommended": tune["recommended"],
            "verdict": tune["verdict"], "given": g, "tuned": t,
            "tune_held_out": {"given": tune["given"]["reportedOn"], "best": tune["best"]["reportedOn"]},
            "hindsight_best": tune.get("hindsightBest"),
            "ideal_replica_hours": ideal,
            "replica_hours_saved": round(1 - t["replicaHours"] / g["replicaHours"], 3),
            "over_ideal": round(t["replicaHours"] / ideal - 1, 3),
            "budget_seconds": tune["budgetSeconds"]["reportedOn"], **speed}


def figures(s: dict) -> dict:
    e = s["exposure"]
    return {"replicaHours": s["replicaHours"], "secondsUnderProvisioned": e["secondsUnderProvisioned"],
            "timeToCapacitySeconds": e["timeToCapacitySeconds"], "scaleEvents": s["scaleEvents"]}


def replays(url: str, files: dict[str, tuple[Path, Path]], start: int, end: int, step: int = STEP) -> tuple[dict, Any]:
    """Each spec's replay (label: (spec, rules)) as backtest makes it, and the last one's histories."""
    from autoscaler.backtest.replay import replay
    from autoscaler.backtest.specs import load_specs

    runs = {}
    for label, (spec_file, rules) in files.items():
        args = cli._parser().parse_args([str(spec_file), "--prometheus-url", url, "--rules", str(rules),
                                         "--from", str(start), "--to", str(end), "--step", f"{step}s",
                                         "--startup-delay", "90s", "--initial-replicas", "10", "--no-progress"])
        h = read.read_histories(args, load_specs(str(spec_file)), sys.stderr)
        p = h.plans[0]
        runs[label] = replay(p.spec.spec, p.queries, h.data, h.grid, 10, 90.0, h.config)
    return runs, h


def plot(path: Path, url: str, files: dict[str, tuple[Path, Path]], week2: int, end: int) -> None:
    """Week 2's replicas for each spec (label: (spec, rules)), and the ideal, from the same replays
    backtest makes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs, h = replays(url, files, week2, end)
    times = (h.grid.times * 1000).astype("datetime64[ms]")
    ideal = h.data[h.plans[0].queries[0].promql].total / REFERENCE
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 7.5))
    # (a) the first weekday 09:00 spike of week 2, two hours around it
    t0 = next(t for t in range(week2, end, 3600) if time.gmtime(t).tm_wday < 5 and time.gmtime(t).tm_hour == 8)
    window = (h.grid.times >= t0) & (h.grid.times < t0 + 3 * 3600)
    ax1.plot(times[window], ideal[window], color="tab:gray", linewidth=0.8, label="observed load / 40 (ideal)")
    for label, color in (("HPA default", "black"), ("+ seasonal forecast", "tab:blue")):
        ax1.step(times[window], runs[label].ready[window], where="post", color=color, label=f"{label}: ready pods")
    ax1.set_title("(a) a weekday 09:00 spike in week 2: ready pods (the forecast scales 5 minutes ahead)", fontsize=10)
    ax1.legend(fontsize=8)
    ax1.set_ylabel("pods")
    every = 8
    ax2.plot(times[::every], ideal[::every], color="tab:gray", linewidth=0.6, label="observed load / 40 (ideal)")
    for label, color in (("conservative", "tab:orange"), ("tuned", "tab:green")):
        ax2.step(times[::every], runs[label].replicas[::every], where="post", color=color, linewidth=0.8,
                 label=f"{label}: replicas")
    ax2.set_title("(b) week 2: the conservative spec and tune's recommendation (chosen on week 1)", fontsize=10)
    ax2.legend(fontsize=8)
    ax2.set_ylabel("replicas")
    save(fig, path)


def save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def arguments(doc: str, results: str, png: str) -> argparse.ArgumentParser:
    """The flags of the forecast benches: where the figures (bench/results/) and the plot (docs/) go."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    root = Path(__file__).resolve().parents[1]
    ap.add_argument("--out", default=str(root / "bench" / "results" / results))
    ap.add_argument("--png", default=str(root / "docs" / png))
    return ap


def main() -> int:
    ap = arguments(__doc__, "tune.json", "forecast-and-tune-benchmark.png")
    ap.add_argument("--quick", action="store_true", help="(c) alone: one tune (the 1%% budget), no backtests, no plot")
    ap.add_argument("--before-days", type=float, default=7.0,
                    help="days of history before week 1 (default 7: week 0; less leaves season sets uncovered)")
    args = ap.parse_args()
    # two whole weeks ending at the last midnight (UTC) before now - 1 h, starting on a Monday
    now = int(time.time()) - 3600
    end = now - now % 86400
    start = end - DAYS * 86400
    start -= (time.gmtime(start).tm_wday) * 86400   # back to a Monday: week 1 is Mon..Sun
    end = start + DAYS * 86400 - STEP
    week2 = start + 7 * 86400
    t0 = time.perf_counter()
    text = history(start - round(args.before_days * 86400), end)   # and week 0: the 7d forecast's history for week 1
    prom = start_backfilled(text)
    backfill = time.perf_counter() - t0
    result: dict[str, Any] = {"benchmark": "tune", "days": DAYS, "step_seconds": STEP, "reference": REFERENCE,
                              "days_before": args.before_days, "quick": args.quick,
                              "startup_delay_seconds": 90, "history_samples": text.count("\n") - 2,
                              "backfill_seconds_not_timed": round(backfill, 1)}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            rules = d / "rules.yaml"
            rules.write_text(yaml.safe_dump(RULES))
            files = {"HPA default": d / "default.yaml", "+ seasonal forecast": d / "forecast.yaml",
                     "conservative": d / "conservative.yaml"}
            files["HPA default"].write_text(yaml.safe_dump(spec("web", REFERENCE)))
            files["+ seasonal forecast"].write_text(yaml.safe_dump(spec("web", REFERENCE, forecast=True)))
            files["conservative"].write_text(yaml.safe_dump(spec("web", REFERENCE * 0.7, behavior=CONSERVATIVE)))
            if args.quick:
                c = tune_and_check("b2", "1%", files, prom.url, rules, start, end, week2, d, Path(args.out).parent,
                                   check=False)
                result["c"] = {**c, "days_chosen_on": 7, "days_fetched": DAYS, "goal_seconds": SPEED_GOAL,
                               "met": c["candidates"] >= 100 and c["seconds"] < SPEED_GOAL}
            else:
                # (a)
                a_default, a_forecast = backtest([files["HPA default"], files["+ seasonal forecast"]], prom.url, rules,
                                                 week2, end, d / "a")
                fa, fb = figures(a_default), figures(a_forecast)
                result["a"] = {
                    "default": fa, "forecast": fb,
                    "under_provisioned_ratio": round(fb["secondsUnderProvisioned"]
                                                     / max(fa["secondsUnderProvisioned"], 1), 3),
                    "replica_hours_ratio": round(fb["replicaHours"] / fa["replicaHours"], 3),
                }
                result["a"]["met"] = (result["a"]["under_provisioned_ratio"] <= 0.5
                                      and result["a"]["replica_hours_ratio"] <= 1.1)
                # (b) + (c): "no more under-provisioned than now" (b1) and "inside the 1% budget" (b2)
                runs = {}
                for key, budget in (("b1", "given"), ("b2", "1%")):
                    runs[key] = tune_and_check(key, budget, files, prom.url, rules, start, end, week2, d,
                                               Path(args.out).parent)
                b1, b2 = runs["b1"], runs["b2"]
                result["b"] = {
                    "b1_no_more_under_provisioned": {k: v for k, v in b1.items() if k != "rules"},
                    "b2_budget_1pct": {k: v for k, v in b2.items() if k != "rules"},
                    "met": (b1["replica_hours_saved"] >= 0.2
                            and b1["tuned"]["secondsUnderProvisioned"] <= b1["given"]["secondsUnderProvisioned"]
                            and b2["over_ideal"] <= 0.1
                            and b2["tuned"]["secondsUnderProvisioned"] <= b2["budget_seconds"]),
                }
                result["c"] = {"candidates": b2["candidates"], "days_chosen_on": 7, "days_fetched": DAYS,
                               "seconds": b2["seconds"], "split": b2["split"], "goal_seconds": SPEED_GOAL,
                               "engine": b2["engine"], "other_run_seconds": b1["seconds"],
                               "range_queries": b2["range_queries"], "seasons_tried": b2["seasons_tried"],
                               "met": b2["candidates"] >= 100 and max(b1["seconds"], b2["seconds"]) < SPEED_GOAL}
                plot(Path(args.png), prom.url, {
                    "HPA default": (files["HPA default"], rules),
                    "+ seasonal forecast": (files["+ seasonal forecast"], rules),
                    "conservative": (files["conservative"], rules), "tuned": (files["tuned-b2"], b2["rules"])},
                    week2, end)
    finally:
        prom.close()
    result.update({"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
                   "load_average_at_end": os.getloadavg()[0]})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    c = result["c"]
    if not args.quick:
        print_ab(result["a"], result["b"])
    print(f"(c) tune: {c['candidates']} candidates, {c['seconds']}s (goal < {SPEED_GOAL:g}s), "
          f"{c['range_queries']:g} range queries, seasons tried {', '.join(c['seasons_tried']) or 'none'}: "
          f"{'met' if c['met'] else 'NOT met'}")
    print(f"  (history: {result['history_samples']:,} samples, backfilled in {backfill:.0f}s, not timed)")
    return 0


def print_ab(a: dict, b: dict) -> None:
    print(f"(a) forecast vs HPA default, week 2: under-provisioned {a['forecast']['secondsUnderProvisioned']:g}s vs "
          f"{a['default']['secondsUnderProvisioned']:g}s (x{a['under_provisioned_ratio']}), replica-hours "
          f"x{a['replica_hours_ratio']}: {'met' if a['met'] else 'NOT met'}")
    for key in ("b1_no_more_under_provisioned", "b2_budget_1pct"):
        r = b[key]
        print(f"(b) tune --max-above-target {r['budget']}, week 2: replica-hours {r['tuned']['replicaHours']} vs "
              f"{r['given']['replicaHours']} ({r['replica_hours_saved']:.0%} saved), under-provisioned "
              f"{r['tuned']['secondsUnderProvisioned']:g}s vs {r['given']['secondsUnderProvisioned']:g}s, "
              f"{r['over_ideal']:+.1%} over the ideal {r['ideal_replica_hours']}")
    print(f"(b) {'met' if b['met'] else 'NOT met'}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
