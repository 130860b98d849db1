"""Probe: Holt-Winters (statsmodels' `ExponentialSmoothing`, the method PHPA uses) against the
project's PromQL seasonal forecasts on `real_traces_bench`'s four real demand traces (issue 35: a
method PromQL cannot express runs in the adapter only if measured better on the traces).

Each trace is built, scaled, shifted and backfilled exactly as in `real_traces_bench` (the same
functions). Holt-Winters is then computed the way an adapter would serve it, causal only:

- its input is the range data the adapter would read: the rule's own metric (`sum(rate(...[2m]))`,
  fetched by backtest's reader at 60 s), averaged into buckets at the trace's native resolution
  (5 minutes for bank_calls and nyc_departures, 15 for mpls_stops, 30 for elecdemand);
- once a day (midnight UTC), the model is fitted (parameters and initial states, statsmodels'
  optimizer, heuristic initialisation) on the trailing 3 weeks of buckets; through that day its
  parameters stay and its states follow each bucket as it completes (statsmodels' filter with the
  day's parameters fixed: a bucket's states read only the buckets up to it);
- at each decision step t (60 s), the forecast for t + 5m (the rules' horizon) from the states of
  the last bucket complete at t, linear between the forecasts of the buckets' mid-points;
- seasonal period 1d or 7d, additive or multiplicative seasonality (multiplicative on the load + 1
  request/s, since the traces have zeros), no trend or a damped additive one: 8 variants.

Each variant's forecast (the total requests/s) is backfilled as a gauge `hw_forecast{namespace,
config}` into the same Prometheus, and a spec = the HPA default spec + an External metric read by
an externalRules rule, `target.averageValue` 40 (divided by the current replicas, as a Pods metric
is by the pods), so the HPA takes the larger of the two. Every forecast, PromQL's too, is also
measured at a margin of 1.05 and 1.1 (its target / margin), and so is headroom alone (the HPA
default at target 40 / margin, no forecast), to compare the methods along their trade-off, not at
one point. A
control of that delivery: each PromQL forecast, as served, goes through the same gauge and External
metric and must read what its Pods metric reads. `backtest` replays weeks 3-4 for the HPA default
spec, the same + each PromQL forecast ("1d" and real_traces_bench's best settings on the bursty
traces) and the same + each Holt-Winters variant. Per trace: seconds under-provisioned and
replica-hours over the HPA default's (real_traces_bench's (a), its goal 0.5x at 1.1x), the best of
each method (nearest that goal), the other's and headroom's best at no more replica-hours, and each
forecast's error against the load one horizon later (bias, MAE, share below; backtest's
`forecasterror`). Writes bench/results/holtwinters.json.

    python bench/holtwinters_probe.py                         # all four, the bursty ones first
    python bench/holtwinters_probe.py --traces mpls_stops
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoscaler.backtest import cli, read
from autoscaler.backtest.forecasterror import came, forecast_error
from autoscaler.backtest.specs import load_specs
from bench.real_traces_bench import (
    DAY,
    FORECASTS,
    STEP,
    backfilled,
    forecast_spec,
    nearest_goal,
    ratios,
    rules_for,
)
from bench.tune_bench import NS, REFERENCE, backtest, figures, spec
from kubesim.adapterrules import gauge_rule
from kubesim.prometheus import backfill

HORIZON = 300                 # the rules' forecast horizon
TRAIN_DAYS = 21               # the trailing window each day's fit reads
GAUGE = "hw_forecast"
# the PromQL forecasts measured beside: the one tune starts from, and real_traces_bench's best on the
# bursty traces (nyc_departures; mpls_stops)
PROMQL = {key: FORECASTS[key] for key in ("1d", "7d median of 3, envelope mean, levelWindow 3h, margin 1.02",
                                          "1d median of 5, envelope mean, levelWindow 3h")}
MARGINS = (1.0, 1.05, 1.1)    # Holt-Winters' forecast x margin: the External target 40 / margin
ORDER = ("mpls_stops", "nyc_departures", "bank_calls", "elecdemand")   # the bursty ones first


@dataclass(frozen=True)
class Variant:
    period_days: int
    seasonal: str      # "add" or "mul"
    damped: bool       # a damped additive trend, or none

    @property
    def label(self) -> str:
        return f"{self.period_days}d-{self.seasonal}" + ("-damped" if self.damped else "")

    @property
    def offset(self) -> float:
        """Multiplicative seasonality needs a positive series: the traces have zeros."""
        return 1.0 if self.seasonal == "mul" else 0.0


VARIANTS = tuple(Variant(p, s, d) for p in (1, 7) for s in ("add", "mul") for d in (False, True))


def buckets(times: np.ndarray, load: np.ndarray, res: int) -> tuple[int, np.ndarray]:
    """The load averaged over native buckets (b*res, (b+1)*res] (complete once t reaches their end):
    the first bucket's index and the values (a bucket without data keeps the one before)."""
    idx = (times.astype(np.int64) - 1) // res
    first = int(idx[0])
    ok = np.isfinite(load)
    sums = np.bincount(idx[ok] - first, weights=load[ok], minlength=int(idx[-1]) - first + 1)
    counts = np.bincount(idx[ok] - first, minlength=int(idx[-1]) - first + 1)
    values = np.full(len(sums), math.nan)
    values[counts > 0] = sums[counts > 0] / counts[counts > 0]
    for i in range(1, len(values)):
        if not np.isfinite(values[i]):
            values[i] = values[i - 1]
    return first, np.nan_to_num(values)


def ahead(fit: Any, at: np.ndarray, steps: int, m: int, v: Variant) -> np.ndarray:
    """The h-step forecasts (h = 1..steps; rows: `at`) from the fitted filter's states after bucket
    `at`, as statsmodels' own `forecast` makes them at the series' end: (level + phi_h trend) with
    the season of the bucket forecast (statsmodels' `season[k]` is the factor of bucket k + m)."""
    h = np.arange(1, steps + 1)
    base = fit.level[at][:, None] + np.zeros(steps)
    if v.damped:
        phi = float(fit.params["damping_trend"])
        base = base + np.cumsum(phi ** h)[None, :] * fit.trend[at][:, None]
    season = fit.season[at[:, None] + h[None, :] - m]
    return base * season if v.seasonal == "mul" else base + season


def fit_day(y: np.ndarray, train: int, m: int, v: Variant) -> Any:
    """Fit on the first `train` buckets of `y` (optimized), then filter all of `y` with that fit's
    parameters and initial states fixed: causal, each bucket's states read the buckets up to it."""
    from statsmodels.tsa.holtwinters import ExponentialSmoothing

    shape = {"trend": "add" if v.damped else None, "damped_trend": v.damped, "seasonal": v.seasonal,
             "seasonal_periods": m}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # convergence notes of the optimizer
        p = ExponentialSmoothing(y[:train] + v.offset, initialization_method="heuristic", **shape).fit().params
        known = {"initial_level": p["initial_level"], "initial_seasonal": p["initial_seasons"],
                 "initial_trend": p["initial_trend"] if v.damped else None}
        fixed = {"smoothing_level": p["smoothing_level"], "smoothing_seasonal": p["smoothing_seasonal"],
                 **({"smoothing_trend": p["smoothing_trend"], "damping_trend": p["damping_trend"]} if v.damped else {})}
        return ExponentialSmoothing(y + v.offset, initialization_method="known", **known, **shape).fit(
            optimized=False, **fixed)


def hw_forecast(times: np.ndarray, load: np.ndarray, res: int, decisions: np.ndarray, v: Variant
                ) -> tuple[np.ndarray, dict[str, Any]]:
    """Holt-Winters' forecast for t + HORIZON at each decision time t (whole days from a midnight),
    refitted each midnight on the trailing TRAIN_DAYS of native buckets; and what the fits cost."""
    first, y = buckets(times, load, res)
    m = v.period_days * DAY // res
    steps = math.ceil(HORIZON / res + 0.5) + 1
    out = np.full(len(decisions), math.nan)
    fit_seconds, params = [], []
    for day in range(int(decisions[0]), int(decisions[-1]) + 1, DAY):
        start = (day - TRAIN_DAYS * DAY) // res - first          # the training window's first bucket
        stop = (day + DAY) // res - first                         # the day's last bucket, + 1
        t0 = time.perf_counter()
        fit = fit_day(y[start:stop], day // res - first - start, m, v)
        fit_seconds.append(time.perf_counter() - t0)
        params.append([float(fit.params[k]) for k in ("smoothing_level", "smoothing_seasonal")])
        end = stop - start - 1                # statsmodels' own forecast at the end: the formula must agree
        if not np.allclose(ahead(fit, np.array([end]), steps, m, v)[0], fit.forecast(steps), rtol=1e-9, atol=1e-9):
            raise SystemExit(f"holtwinters_probe: {v.label}: the states do not give statsmodels' forecast")
        mask = (decisions >= day) & (decisions < day + DAY)
        t = decisions[mask].astype(np.int64)
        last = t // res - 1                                        # the last bucket complete at t
        f = ahead(fit, last - first - start, steps, m, v) - v.offset
        pos = np.clip((t + HORIZON) / res - 0.5 - last, 1, steps)  # buckets ahead of `last`, mid-points
        lo = np.minimum(np.floor(pos).astype(int), steps - 1)
        frac = pos - lo
        rows = np.arange(len(t))
        out[mask] = np.maximum(f[rows, lo - 1] * (1 - frac) + f[rows, lo] * frac, 0.0)
    return out, {"fit_seconds_per_day": round(float(np.mean(fit_seconds)), 2),
                 "buckets_per_fit": TRAIN_DAYS * DAY // res, "seasonal_period_buckets": m,
                 "alpha_mean": round(float(np.mean([p[0] for p in params])), 3),
                 "gamma_mean": round(float(np.mean([p[1] for p in params])), 3)}


def gauge_text(decisions: np.ndarray, forecasts: dict[str, np.ndarray]) -> str:
    lines = [f"# TYPE {GAUGE} gauge"]
    for label, values in forecasts.items():
        lines += [f'{GAUGE}{{namespace="{NS}",config="{label}"}} {v:.4f} {t}'
                  for t, v in zip(decisions.astype(np.int64), values, strict=True) if np.isfinite(v)]
    return "\n".join(lines) + "\n# EOF\n"


def gauge_spec(name: str, config: str, margin: float = 1.0) -> dict:
    """The HPA default spec + the gauge `config` as an External metric at the reference per-pod
    target (/ margin: the same as the forecast x margin)."""
    out = spec(name, REFERENCE)
    out["spec"]["metrics"].append({"type": "External", "external": {
        "metric": {"name": GAUGE, "selector": {"matchLabels": {"config": config}}},
        "target": {"type": "AverageValue", "averageValue": f"{REFERENCE / margin:.3f}"}}})
    return out


def write(files: dict[str, Path], label: str, path: Path, doc: dict) -> None:
    files[label] = path
    path.write_text(yaml.safe_dump(doc))


def histories(url: str, files: list[Path], rules: Path, start: int, end: int) -> Any:
    """The specs' series as backtest fetches them (`read_histories`)."""
    args = cli._parser().parse_args([*map(str, files), "--prometheus-url", url, "--rules", str(rules), "--from",
                                     str(start), "--to", str(end), "--step", f"{STEP}s", "--no-progress"])
    return read.read_histories(args, [s for f in files for s in load_specs(str(f))], sys.stderr)


def error(forecast: np.ndarray, came_: np.ndarray) -> dict[str, Any]:
    e = forecast_error(forecast, came_)
    both = np.isfinite(forecast) & np.isfinite(came_)
    return {"bias": round(e.bias or 0.0, 2), "relative_bias": round(e.relative_bias or 0.0, 4),
            "mae": round(float(np.mean(np.abs(forecast[both] - came_[both]))), 2),
            "below_share": round(e.below or 0.0, 3), "steps": e.steps}


def run(name: str, d: Path) -> dict[str, Any]:
    started = time.perf_counter()
    setup = backfilled(name, d)   # real_traces_bench's trace, history and Prometheus
    prom, pre, week3, end, res = setup.prom, setup.pre, setup.week3, setup.end, setup.resolution
    out: dict[str, Any] = {**setup.out, "native_resolution_seconds": res}
    try:
        promql_rules, names = rules_for(PROMQL)
        rules = d / "rules.yaml"
        rules.write_text(yaml.safe_dump({**promql_rules, "externalRules": [
            gauge_rule(f'{GAUGE}{{namespace!=""}}', ("namespace",))]}))
        files: dict[str, Path] = {}
        write(files, "HPA default", d / "default.yaml", spec("web", REFERENCE))
        for key, metric in names.items():
            write(files, f"+ PromQL {key}", d / f"{metric}.yaml",
                  forecast_spec(f"web-{metric.replace('_', '-')}", metric))
        # the range data an adapter would fit on: the rule's own metric, from the history's start
        h = histories(prom.url, [files["HPA default"]], rules, pre + 600, end)
        fit_times, load = h.grid.times, h.data[h.plans[0].queries[0].promql].total
        # the PromQL forecasts as served, and the load that came one horizon later
        h = histories(prom.url, list(files.values()), rules, week3, end)
        decisions = h.grid.times
        observed = h.data[h.plans[0].queries[0].promql].total
        came_ = came(observed, HORIZON / STEP)
        served = {label: h.data[p.queries[1].promql].total for label, p in zip(list(files)[1:], h.plans[1:],
                                                                                 strict=True)}
        gauges, costs = {}, {}
        for v in VARIANTS:
            gauges[v.label], costs[v.label] = hw_forecast(fit_times, load, res, decisions, v)
            print(f"{name}: {v.label} fitted ({costs[v.label]['fit_seconds_per_day']}s a day)", flush=True)
        # a control of the delivery: each PromQL forecast as served, through the same gauge and External metric
        controls = {f"promql-{i}": served[f"+ PromQL {key}"] for i, key in enumerate(names)}
        prom.stop()
        backfill(gauge_text(decisions, {**gauges, **controls}), prom.data_dir, "24h")
        prom.start()
        forecasts: dict[str, np.ndarray] = {}    # each spec's forecast as served, x its margin
        for (config, _), key in zip(controls.items(), names, strict=True):
            write(files, f"+ PromQL {key}, as an External gauge", d / f"{config}.yaml",
                  gauge_spec(f"web-{config}", config))
            forecasts[f"+ PromQL {key}, as an External gauge"] = served[f"+ PromQL {key}"]
        for margin in MARGINS:
            suffix = "" if margin == 1.0 else f", x{margin:g}"
            if margin != 1.0:   # headroom alone: the HPA default at the target / margin, no forecast
                write(files, f"HPA default, target {REFERENCE / margin:.1f} (no forecast){suffix}",
                      d / f"headroom-{margin:g}.yaml", spec(f"web-headroom-{round(margin * 100)}", REFERENCE / margin))
                for key, metric in names.items():
                    doc = forecast_spec(f"web-{metric.replace('_', '-')}-{round(margin * 100)}", metric)
                    doc["spec"]["metrics"][1]["pods"]["target"]["averageValue"] = f"{REFERENCE / margin:.3f}"
                    write(files, f"+ PromQL {key}{suffix}", d / f"{metric}-{margin:g}.yaml", doc)
                    forecasts[f"+ PromQL {key}{suffix}"] = served[f"+ PromQL {key}"] * margin
            for label in gauges:
                write(files, f"+ HW {label}{suffix}", d / f"hw-{label}-{margin:g}.yaml",
                      gauge_spec(f"web-hw-{label}-{round(margin * 100)}", label, margin))
                forecasts[f"+ HW {label}{suffix}"] = gauges[label] * margin
        forecasts.update(served)
        labels = list(files)
        summaries = backtest([files[k] for k in labels], prom.url, rules, week3, end, d / "a", STEP)
        a = {label: figures(s) for label, s in zip(labels, summaries, strict=True)}
        base = a["HPA default"]
        h = histories(prom.url, [files[f"+ HW {k}"] for k in gauges], rules, week3, end)
        readback = max(float(np.nanmax(np.abs(h.data[p.queries[1].promql].total - gauges[label])))
                       for label, p in zip(gauges, h.plans, strict=True))
        rows = {label: ratios(a[label], base) for label in labels[1:]}
        for label, row in rows.items():
            if label in forecasts:
                row["forecast_error"] = error(forecasts[label], came_)
            if label.startswith("+ HW"):
                row["fit"] = costs[label.removeprefix("+ HW ").split(",")[0]]
        promql = {k: r for k, r in rows.items() if k.startswith("+ PromQL") and "External" not in k}
        hws = {k: r for k, r in rows.items() if k.startswith("+ HW")}
        headroom = {k: r for k, r in rows.items() if "no forecast" in k}
        best_p, best_h = nearest_goal(promql), nearest_goal(hws)
        out.update({"default": base, "present_as_forecast_error": error(observed, came_),
                    "hw_gauge_read_back_max_abs_diff": round(readback, 4), "rows": rows,
                    "best_promql": best_p, "best_hw": best_h,
                    "hw_nearer_goal": nearest_goal({best_p: promql[best_p], best_h: hws[best_h]}) == best_h,
                    "hw_at_no_more_replica_hours": at_cost(hws, promql[best_p]),
                    "promql_at_no_more_replica_hours": at_cost(promql, hws[best_h]),
                    "headroom_at_no_more_replica_hours_than_best_hw": at_cost(headroom, hws[best_h]),
                    "seconds": round(time.perf_counter() - started, 1)})
    finally:
        prom.close()
    return out


def at_cost(rows: dict[str, dict[str, Any]], other: dict[str, Any]) -> dict[str, Any] | None:
    """Of `rows`, the least under-provisioned at no more replica-hours than `other`: which
    method does better at the same cost."""
    fit = {k: r for k, r in rows.items() if r["replica_hours_ratio"] <= other["replica_hours_ratio"]}
    if not fit:
        return None
    k = min(fit, key=lambda k: (fit[k]["under_provisioned_ratio"], fit[k]["replica_hours_ratio"]))
    return {"spec": k, "under_provisioned_ratio": fit[k]["under_provisioned_ratio"],
            "replica_hours_ratio": fit[k]["replica_hours_ratio"]}


def line(name: str, r: dict[str, Any]) -> str:
    p, h = r["rows"][r["best_promql"]], r["rows"][r["best_hw"]]
    return (f"{name}: best PromQL {r['best_promql']}: x{p['under_provisioned_ratio']} at x{p['replica_hours_ratio']}, "
            f"MAE {p['forecast_error']['mae']}; best HW {r['best_hw']}: x{h['under_provisioned_ratio']} at "
            f"x{h['replica_hours_ratio']}, MAE {h['forecast_error']['mae']}; "
            f"nearer the goal: {'HW' if r['hw_nearer_goal'] else 'PromQL'}; at no more replica-hours than the best "
            f"PromQL, HW's best: {r['hw_at_no_more_replica_hours']}; than the best HW, headroom alone: "
            f"{r['headroom_at_no_more_replica_hours_than_best_hw']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", nargs="+", default=list(ORDER), choices=ORDER)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "holtwinters.json"))
    args = ap.parse_args()
    try:
        import statsmodels
    except ImportError:
        raise SystemExit("holtwinters_probe: needs statsmodels: pip install -e '.[bench]'") from None
    results: dict[str, Any] = {}
    started = time.perf_counter()
    for name in args.traces:
        with tempfile.TemporaryDirectory() as tmp:
            results[name] = run(name, Path(tmp))
        print(line(name, results[name]), flush=True)
    summary = {"benchmark": "Holt-Winters vs PromQL seasonal forecasts, real traces, weeks 3-4",
               "step_seconds": STEP, "horizon_seconds": HORIZON, "train_days": TRAIN_DAYS,
               "reference": REFERENCE, "statsmodels": statsmodels.__version__, "traces": results,
               "seconds": round(time.perf_counter() - started, 1), "machine": platform.machine(),
               "cpus": os.cpu_count(), "python": platform.python_version(),
               "load_average_at_end": os.getloadavg()[0]}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2, default=str) + "\n")
    for name, r in results.items():
        print(line(name, r))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
