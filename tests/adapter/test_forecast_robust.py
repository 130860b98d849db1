"""The forecast options against noise (`pastSeasons`, `combine`, `envelope`, `quantile`, `margin`)
on a real Prometheus holding bursty random counts, each answer worked out with numpy from the very
samples that were backfilled (never asked of the code under test).

The history: `load{queue}` gauges, one random whole number from 0 to 20 every 60 s on whole
minutes. Season 1h, level window 10m, horizon 5m, resolution 1m. Asked half a minute after a whole
minute, so each subquery window holds whole-minute points well inside it (no boundary sample, on
any Prometheus version): the window `(t - o - w, t - o]` holds the w / 60 samples up to `t - o`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest
import yaml

from adapter.forecast import forecast_query
from adapter.naming import compile_rules
from adapter.rules import Forecast, parse_rules
from kubesim.prometheus import PrometheusServer, start_backfilled

from . import forecast_data as fd
from .test_forecast import forecast_error

P, W, H, R = 3600, 600, 300, 60  # season, level window, horizon, resolution
QUERY = "sum by (queue) (load)"
BASE = Forecast("f", "seasonal", H, seasons=(P,), level_window=W, resolution=R)
# queue -> seconds of history before T0; "young" has one whole season (1h + 10m) but not two
BEGAN = {"a": 5 * P, "b": 5 * P, "young": P + W + 300}


@pytest.fixture(scope="module")
def samples() -> tuple[int, dict[str, dict[int, float]]]:
    t0 = fd.start_time()
    rng = np.random.default_rng(35)
    out = {q: {t: float(rng.integers(0, 21)) for t in range(t0 - ago, t0 + 600 + 1, 60)} for q, ago in BEGAN.items()}
    return t0, out


@pytest.fixture(scope="module")
def prom(samples) -> Iterator[PrometheusServer]:
    _, series = samples
    lines = ["# TYPE load gauge"]
    for q, points in series.items():
        lines.extend(f'load{{queue="{q}"}} {v} {t}' for t, v in points.items())
    with start_backfilled("\n".join([*lines, "# EOF"]) + "\n") as server:
        yield server


def window(points: dict[int, float], end: int, seconds: int) -> np.ndarray:
    """The samples of the whole minutes in (end - seconds, end]; empty where the series had none."""
    return np.array([points[t] for t in range(end - seconds + 60, end + 1, 60) if t in points])


def expected(f: Forecast, points: dict[int, float], t0: int) -> float | None:
    """The forecast at T0 + 30 s by hand: for each past season i (1..k) with whole history, the
    envelope of the horizon after the phase i seasons ago times today's level over that one's."""
    now = window(points, t0, W).mean()
    terms = []
    for i in range(1, f.past_seasons + 1):
        ago = t0 - i * P
        if ago - W not in points:  # the guard: the level window i seasons ago is whole
            continue
        span = window(points, ago + H, H) if f.envelope != "last" else window(points, ago + H, R)
        value = {"last": span[-1] if len(span) else np.nan, "mean": span.mean(), "max": span.max(),
                 "quantile": np.quantile(span, f.quantile)}[f.envelope]
        level = window(points, ago, W).mean()
        if level > 0:
            terms.append(value * now / level)
    if not terms:
        return None
    combined = {"mean": np.mean, "max": np.max, "median": np.median,
                "quantile": lambda x: np.quantile(x, f.quantile)}[f.combine](terms)
    return float(combined) * f.margin


def answer(prom: PrometheusServer, f: Forecast, t0: int) -> dict[str, float]:
    return fd.vector(prom.url, forecast_query(f, QUERY), t0 + 30)


@pytest.mark.parametrize("options", [
    {"envelope": "max"},
    {"envelope": "mean"},
    {"envelope": "quantile", "quantile": 0.8},
    {"past_seasons": 4},                                       # mean of the last four hours, same phase
    {"past_seasons": 4, "combine": "median"},
    {"past_seasons": 3, "combine": "max"},
    {"past_seasons": 4, "combine": "quantile", "quantile": 0.75, "envelope": "mean"},
    {"past_seasons": 4, "combine": "median", "envelope": "max", "margin": 1.2},
    {"margin": 0.9},
])
def test_robust_options_answer_the_numpy_computation(prom, samples, options):
    t0, series = samples
    f = replace(BASE, **options)
    want = {q: expected(f, points, t0) for q, points in series.items()}
    assert all(v is not None for v in want.values())  # every queue has at least one whole season
    got = answer(prom, f, t0)
    assert got == pytest.approx(want, rel=1e-9)


def test_a_series_with_fewer_whole_seasons_combines_those_it_has(prom, samples):
    """"young" has one whole season: its median of the last four is that one season's term; the
    others combine four, which differs from their last season's term alone."""
    t0, series = samples
    f = replace(BASE, past_seasons=4, combine="median", envelope="max")
    got = answer(prom, f, t0)
    one = replace(f, past_seasons=1)
    assert got["young"] == pytest.approx(expected(one, series["young"], t0), rel=1e-9)
    assert got["a"] != pytest.approx(expected(one, series["a"], t0), rel=1e-3)


def test_the_defaults_keep_the_forecast_text_of_before():
    """A block without the new fields renders the single-season formula, unchanged."""
    text = forecast_query(BASE, QUERY)
    assert text.startswith(f"(last_over_time(({QUERY})[60s:60s] offset 3300s) * (")
    assert "promscaler_season" not in text and "max_over_time" not in text


SEASONAL = {"method": "seasonal", "horizon": "5m", "season": "1d"}


@pytest.mark.parametrize("block,message", [
    ({**SEASONAL, "pastSeasons": 0}, "rules[0].forecast.pastSeasons: must be a whole number from 1 to 12, got 0"),
    ({**SEASONAL, "pastSeasons": "3"}, "rules[0].forecast.pastSeasons: must be a whole number from 1 to 12"),
    ({**SEASONAL, "pastSeasons": 2.5}, "rules[0].forecast.pastSeasons: must be a whole number from 1 to 12"),
    ({**SEASONAL, "combine": "mode"}, "rules[0].forecast.combine: must be mean, median, max or quantile, got 'mode'"),
    ({**SEASONAL, "envelope": "min"}, "rules[0].forecast.envelope: must be last, mean, max or quantile, got 'min'"),
    ({**SEASONAL, "horizon": "30s", "envelope": "max"},
     "rules[0].forecast.envelope: needs a horizon of at least the resolution (60s)"),
    ({**SEASONAL, "quantile": 0.9}, "rules[0].forecast.quantile: applies to combine: quantile or envelope: quantile"),
    ({**SEASONAL, "envelope": "quantile", "quantile": 1.0},
     "rules[0].forecast.quantile: must be a number between 0 and 1 (exclusive), got 1.0"),
    ({**SEASONAL, "combine": "quantile", "quantile": "high"}, "rules[0].forecast.quantile: must be a number"),
    ({**SEASONAL, "margin": 0}, "rules[0].forecast.margin: must be a positive number, got 0"),
    ({**SEASONAL, "margin": True}, "rules[0].forecast.margin: must be a positive number, got True"),
    ({"method": "linear", "horizon": "5m", "window": "30m", "pastSeasons": 2},
     "rules[0].forecast.pastSeasons: applies to method seasonal, not linear"),
])
def test_invalid_robust_options_name_their_field(block, message):
    error = forecast_error(block)
    assert message in error and "\n" not in error


def test_robust_options_parse():
    doc = {"rules": [{"seriesQuery": "x_total", "resources": {"template": "<<.Resource>>"},
                      "metricsQuery": "sum(<<.Series>>)",
                      "forecast": {**SEASONAL, "pastSeasons": 4, "combine": "quantile", "quantile": 0.75,
                                   "envelope": "max", "margin": 1.1}}]}
    f = compile_rules(parse_rules(yaml.safe_dump(doc))).rules[0].rule.forecast
    assert f == Forecast("rules[0].forecast", "seasonal", 300, seasons=(86400,), past_seasons=4, combine="quantile",
                         quantile=0.75, envelope="max", margin=1.1)

