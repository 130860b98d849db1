"""`autoscaler tune` over a real Prometheus holding a small known history, against the answer worked
out by hand.

History (15 s apart, a per-pod gauge so every value is exact): the total load is 100 for 20 steps,
then 200 for 20 steps, and the same again (80 steps, 20 minutes). tune chooses on the first half
and reports on the second. The given spec targets 12 per pod, keeps a 30-minute scale-down window
and removes 1 pod per 10 minutes; the replay starts at 20 replicas; new pods are ready at the next
step. The reference is 10 per pod (`--reference-target 10`: band 11); the budget 5% of each half
(30 s).

By hand:
- with 100 in total, fewer than 10 pods carry more than 11 each (100 / 9 = 11.1): any candidate
  with 9 pods or fewer for more than two steps breaks the budget. That is the fate of the given
  target 12 (it asks for ceil(100 / 12) = 9 pods) as soon as its scale-down lets it: the
  candidate is charged against the reference, not against its own target. With 200 in total,
  19 pods or more are needed;
- the fewest replica-hours is then 10 pods at 100 and 20 pods at 200. A target of 10 gives exactly
  that (ceil(100 / 10), ceil(200 / 10)), but only if the scale-down is immediate: window 0 s and
  100% per 15 s (from 20 to 10 at the first step; back to 10 at the first step at 100 again).
  Lower targets ask for more pods (9.5: 11 and 22). The scale-up is one step either way (the
  given policy allows max(10 + 4, 2 x 10) = 20), so the up policy and the tolerance (every ratio
  is 0.5 or 2) change nothing: the smallest change keeps the given ones;
- on each half it is under-provisioned one step (200 / 10 ready pods at the rise, 15 s <= 30 s):
  10 pods x 300 s + 20 pods x 300 s = 2.5 replica-hours, against the given spec's 20 pods all
  along (its 30-minute window holds the first 20) = 3.33 replica-hours on the held-out half.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from autoscaler.backtest import read, tunecli

from .tunedata import GIVEN, STEP, run_tune

if TYPE_CHECKING:
    from autoscaler.backtest.plan import ForecastSetting
    from autoscaler.backtest.read import Histories


def test_tune_recommends_the_spec_worked_out_by_hand(tune_history, tmp_path: Path):
    code, out, err = run_tune(tune_history, tmp_path)
    assert code == 0, err
    report = json.loads((tmp_path / "report" / "tune.json").read_text())
    assert report["best"]["knobs"] == {"target": "10", "tolerance": None, "scaleDownWindowSeconds": 0,
                                       "scaleDownPolicy": "100% per 15s", "scaleUpPolicy": "given",
                                       "forecastHorizon": None, "addForecast": False, "forecastSeasons": None,
                                       "forecastShape": None}
    assert report["recommended"] is True
    held = report["best"]["reportedOn"]
    assert held["replicaHours"] == round((10 * 20 + 20 * 20) * STEP / 3600, 3)
    assert held["secondsUnderProvisioned"] == 15
    assert report["best"]["chosenOn"]["secondsUnderProvisioned"] == 15
    assert report["given"]["reportedOn"]["replicaHours"] == round(20 * 40 * STEP / 3600, 3)
    assert report["given"]["reportedOn"]["secondsUnderProvisioned"] == 0
    # the ideal: the observed load over the reference target, integrated
    assert held["idealReplicaHours"] == round((10 * 20 + 20 * 20) * STEP / 3600, 3)
    # the given target (12) was tried, and charged against the reference: none of its candidates is within budget
    twelve = [c for c in report["all"] if c["knobs"]["target"] == "12"]
    assert twelve and all(c["chosenOn"]["secondsUnderProvisioned"] > 30 or c["chosenOn"]["replicaHours"] > 2.5
                          for c in twelve)
    assert report["candidates"] >= 100
    # the choice follows the stated rule over every candidate's chosen-on figures: within the budget
    # (its margin), the least under-provisioned of those within the slack of the cheapest
    budget = report["budgetSeconds"]["chosenOn"] * report["margin"]
    within = [c["chosenOn"] for c in report["all"] if c["chosenOn"]["secondsUnderProvisioned"] is not None
              and c["chosenOn"]["secondsUnderProvisioned"] <= budget]
    cheapest = min(c["replicaHours"] for c in within)
    near = [c for c in within if c["replicaHours"] <= cheapest * (1 + report["slack"])]
    assert report["slack"] == 0.02
    assert report["best"]["chosenOn"]["secondsUnderProvisioned"] == min(c["secondsUnderProvisioned"] for c in near)
    recommended = yaml.safe_load((tmp_path / "report" / "recommended.yaml").read_text())
    expected = json.loads(json.dumps(GIVEN))
    expected["spec"]["metrics"][0]["pods"]["target"]["averageValue"] = "10"
    expected["spec"]["behavior"]["scaleDown"] = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                                                 "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}
    assert recommended == expected
    # the output states the objective, the guard and the limits, and shows the difference
    assert "objective: the fewest replica-hours" in out
    assert "against over-fitting: chosen on" in out and "held out" in out
    assert "limits: the same load model and start-up delay (15s) as backtest" in out
    assert "-        averageValue: '12'" in out and "+        averageValue: '10'" in out
    assert "-      stabilizationWindowSeconds: 1800" in out and "+      stabilizationWindowSeconds: 0" in out
    assert (tmp_path / "report" / "tune.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tune_reports_the_hindsight_best_of_its_search_space(tune_history, tmp_path: Path):
    """In hindsight, on the held-out half (the same budget, 5% of it: 30 s), the best of the whole
    search space is what the module docstring works out by hand for either half: 10 pods at 100 and
    20 at 200, one rise of 15 s, 2.5 replica-hours. No knob of the space asks for 19 pods at 200
    (enough: 200 / 19 = 10.5 <= 11): target 10 asks for 20, 12 for 17 (200 / 17 = 11.8 > 11). The
    recommendation is that spec: 0% from it."""
    code, out, err = run_tune(tune_history, tmp_path)
    assert code == 0, err
    report = json.loads((tmp_path / "report" / "tune.json").read_text())
    hindsight = report["hindsightBest"]
    assert hindsight["reportedOn"]["replicaHours"] == round((10 * 20 + 20 * 20) * STEP / 3600, 3)
    assert hindsight["reportedOn"]["secondsUnderProvisioned"] == 15
    assert hindsight["withinBudget"] is True
    assert hindsight["knobs"]["target"] == "10" and hindsight["knobs"]["scaleDownWindowSeconds"] == 0
    assert hindsight["recommendedReplicaHoursAbove"] == 0.0
    assert hindsight["candidates"] >= report["candidates"]  # every candidate tried, and the grid in hindsight
    assert "hindsight: the best of this search space on the held-out part, under the same budget" in out
    assert "the recommendation is +0.0% in replica-hours from it" in out


def test_tune_bad_input_is_one_line(tune_history, tmp_path: Path):
    code, _, err = run_tune(tune_history, tmp_path, "--max-above-target", "150%")
    assert code == 2 and err.count("\n") == 1 and "--max-above-target" in err
    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump_all([GIVEN, GIVEN]))
    err_buf = io.StringIO()
    assert tunecli.main([str(two), "--prometheus-url", tune_history[0].url, "--from", "now-1h"], io.StringIO(),
                        err_buf) == 2
    assert err_buf.getvalue().count("\n") == 1 and "one autoscaler" in err_buf.getvalue()


def _forecast_histories(tmp_path: Path, setting: ForecastSetting) -> Histories:
    """What tune reads for a spec with the observed metric and the forecast one, at `setting`
    beside the rule's own, over the forecast tests' known history from T0 - 5m to T0, a minute apart."""
    from autoscaler.backtest.specs import load_specs
    from tests.adapter import forecast_data as fd

    t0 = fd.start_time()
    with fd.backfilled(t0) as prom:
        rules = tmp_path / "rules.yaml"
        rules.write_text(fd.RULES)
        selector = {"matchLabels": {"queue": "orders"}}
        metrics = [{"type": "External", "external": {"metric": {"name": name, "selector": selector},
                                                     "target": {"type": "AverageValue", "averageValue": "10"}}}
                   for name in ("queue_depth", "queue_depth_seasonal")]
        path = tmp_path / "worker.yaml"
        path.write_text(yaml.safe_dump({**GIVEN, "metadata": {"name": "worker", "namespace": "web"},
                                        "spec": {**GIVEN["spec"], "metrics": metrics}}))
        args = tunecli._parser().parse_args([str(path), "--prometheus-url", prom.url, "--rules", str(rules),
                                             "--from", str(t0 - 300), "--to", str(t0), "--step", "60s"])
        return read.read_histories(args, load_specs(str(path)), io.StringIO(), [setting])


def test_forecast_horizons_are_fetched_as_the_adapter_would_serve_them(tmp_path: Path):
    """tune's horizon knob: the forecast metric's PromQL at another horizon, over the forecast tests'
    known history (season 1d; yesterday's queue was 10 until T0 - 1d + 20m, 30 after; today 15).
    From T0 - 5m to T0, the forecast 30m ahead (the rule's) reads yesterday's 30: 30 x 15 / 10 = 45;
    10m ahead it reads yesterday's 10: 10 x 15 / 10 = 15. The observed metric has no horizon."""
    from autoscaler.backtest.plan import ForecastSetting

    h = _forecast_histories(tmp_path, ForecastSetting(600.0))
    plan = h.plans[0]
    assert h.data[plan.queries[1].promql].total.tolist() == pytest.approx([45.0] * 6)
    assert h.data[plan.variants[ForecastSetting(600.0)][1].promql].total.tolist() == pytest.approx([15.0] * 6)
    assert plan.variants[ForecastSetting(600.0)][0].promql == plan.queries[0].promql
    assert h.data[plan.queries[0].promql].total.tolist() == pytest.approx([15.0] * 6)


def test_forecast_shapes_are_fetched_as_the_adapter_would_serve_them(tmp_path: Path):
    """tune's shape knob `envelope mean`: the forecast's PromQL with the mean of the horizon (30m)
    one season ago, over the forecast tests' known history (yesterday's queue 10 until T0 - 1d + 20m,
    30 from then, sampled at whole minutes; today 15). At T0 - 5m + j minutes, the window one day
    ago holds the whole minutes from T0 - 1d - 5m + j to T0 - 1d + 25m + j: 25 - j at 10, 6 + j at
    30; times the level ratio 15 / 10: (10 (25 - j) + 30 (6 + j)) / 31 x 1.5. That is Prometheus 2,
    whose subquery range holds both ends; Prometheus 3's leaves out the first: (10 (24 - j) +
    30 (6 + j)) / 30 x 1.5 = 21 + j. The rule's own (the instant 30m ahead) is 45 throughout."""
    from autoscaler.backtest.plan import ForecastSetting
    from autoscaler.backtest.tunecli import shape

    at = ForecastSetting(None, None, shape("envelope mean"))
    h = _forecast_histories(tmp_path, at)
    plan = h.plans[0]
    assert h.data[plan.queries[1].promql].total.tolist() == pytest.approx([45.0] * 6)
    got = h.data[plan.variants[at][1].promql].total.tolist()
    both_ends = [(10 * (25 - j) + 30 * (6 + j)) / 31 * 1.5 for j in range(6)]
    assert got == pytest.approx(both_ends) or got == pytest.approx([21.0 + j for j in range(6)])


def test_a_shape_reaches_the_forecast_as_the_rules_file_reads_it(tmp_path: Path, monkeypatch):
    """A shape may set any seasonal option the rules file reads, under the rules file's own keys
    (`levelWindow`, which no hand-made rename covered): the forecast tune fetches is the rule's as the
    rules file reads it with those fields, and Prometheus answers it: yesterday's 30 (30m ahead) x
    the level ratio 15 / 10 (the last 10m today, and one day ago, before T0 - 1d + 20m) x margin 2 = 90."""
    from adapter.rules import parse_rules
    from autoscaler.backtest.plan import ForecastSetting
    from autoscaler.backtest.tune import SHAPES
    from autoscaler.backtest.tunecli import shape
    from tests.adapter import forecast_data as fd

    monkeypatch.setitem(SHAPES, "level 10m, margin 2", {"levelWindow": "10m", "margin": 2})
    at = ForecastSetting(None, None, shape("level 10m, margin 2"))
    h = _forecast_histories(tmp_path, at)
    forecast = h.plans[0].variants[at][1]
    rule = yaml.safe_load(fd.RULES)["externalRules"][0]
    assert rule["forecast"]["name"] == "queue_depth_seasonal"
    rule["forecast"].update(levelWindow="10m", margin=2)
    assert forecast.forecast == parse_rules(yaml.safe_dump({"externalRules": [rule]})).external_rules[0].forecast
    assert h.data[forecast.promql].total.tolist() == pytest.approx([90.0] * 6)


@pytest.mark.parametrize("options", [
    {"envelope": "quantile", "quantile": 2}, {"quantile": 0.5}, {"margin": 0}, {"pastSeasons": 13},
    {"combine": "mode"}, {"levelWindow": "soon"}, {"maxLevelRatio": 0.5},
])
def test_a_bad_shape_is_refused_as_the_rules_file_refuses_it(monkeypatch, options):
    """The rules file's one line, naming the shape instead of the rule."""
    from adapter.rules import RuleError, parse_rules
    from autoscaler.backtest.tune import SHAPES
    from autoscaler.backtest.tunecli import shape

    block = {"method": "seasonal", "season": "1d", "horizon": "30m", **options}
    with pytest.raises(RuleError) as rules_file:
        parse_rules(yaml.safe_dump({"externalRules": [{"seriesQuery": "q", "metricsQuery": "q", "forecast": block}]}))
    monkeypatch.setitem(SHAPES, "bad", options)
    with pytest.raises(RuleError) as got:
        shape("bad")
    assert str(got.value) == "SHAPES['bad']" + str(rules_file.value).removeprefix("externalRules[0].forecast")
    assert "\n" not in str(got.value)


def test_a_shape_names_only_options(monkeypatch):
    """What a shape cannot change (the rule's horizon, seasons: other knobs) is refused, not ignored."""
    from adapter.rules import RuleError
    from autoscaler.backtest.tune import SHAPES
    from autoscaler.backtest.tunecli import shape

    monkeypatch.setitem(SHAPES, "bad", {"envelope": "mean", "horizon": "10m"})
    with pytest.raises(RuleError, match=r"^SHAPES\['bad'\]\.horizon: not an option of a seasonal forecast"):
        shape("bad")


def test_a_shape_that_does_not_fit_a_rule_is_not_applied(monkeypatch):
    """An envelope needs a horizon of at least the resolution: on a rule with `resolution: 10m` and
    `horizon: 5m` the rules file refuses `envelope: mean`, so tune does not apply that shape there
    (as a horizon longer than a season is not applied), while a shape that fits is applied."""
    from adapter.rules import RuleError, parse_rules
    from autoscaler.backtest.plan import ForecastSetting, with_setting
    from autoscaler.backtest.tune import SHAPES
    from autoscaler.backtest.tunecli import shape

    def rules(extra: dict) -> str:
        block = {"method": "seasonal", "season": "1d", "horizon": "5m", "resolution": "10m", **extra}
        return yaml.safe_dump({"externalRules": [{"seriesQuery": "q", "metricsQuery": "q", "forecast": block}]})

    with pytest.raises(RuleError, match=r"envelope: needs a horizon of at least the resolution \(600s\)"):
        parse_rules(rules({"envelope": "mean"}))
    cfg = parse_rules(rules({}))

    def forecast_at(name: str) -> object:
        return with_setting(cfg, ForecastSetting(None, None, shape(name))).external_rules[0].rule.forecast

    assert forecast_at("envelope mean") == cfg.external_rules[0].forecast
    assert forecast_at("median of 3, envelope mean") == cfg.external_rules[0].forecast
    monkeypatch.setitem(SHAPES, "median of 3", {"pastSeasons": 3, "combine": "median"})
    assert forecast_at("median of 3") == parse_rules(rules({"pastSeasons": 3, "combine": "median"})) \
        .external_rules[0].forecast


def test_a_candidate_spec_is_the_given_one_with_its_knobs():
    """The knobs land where Kubernetes reads them; the added forecast has the first metric's target."""
    from autoscaler.backtest.tune import Knobs, apply

    k = Knobs("9500m", 0.05, 60, "20% per 60s", "8 pods or 200% per 15s", None, True)
    out = apply(GIVEN, k, "busy_workers_forecast")
    spec = out["spec"]
    assert [m["pods"]["metric"]["name"] for m in spec["metrics"]] == ["busy_workers", "busy_workers_forecast"]
    assert [m["pods"]["target"] for m in spec["metrics"]] == [{"type": "AverageValue", "averageValue": "9500m"}] * 2
    assert spec["behavior"]["scaleDown"] == {"stabilizationWindowSeconds": 60, "tolerance": 0.05, "selectPolicy": "Max",
                                             "policies": [{"type": "Percent", "value": 20, "periodSeconds": 60}]}
    assert spec["behavior"]["scaleUp"] == {"tolerance": 0.05, "selectPolicy": "Max",
                                           "policies": [{"type": "Pods", "value": 8, "periodSeconds": 15},
                                                        {"type": "Percent", "value": 200, "periodSeconds": 15}]}
    assert GIVEN["spec"]["metrics"][0]["pods"]["target"]["averageValue"] == "12"  # the given spec is untouched


def test_choose_pays_up_to_the_slack_for_room_under_the_budget():
    """Within the budget, the candidates within 2% of the cheapest one's replica-hours come first,
    the least under-provisioned first: replica-hours hold between periods, seconds
    under-provisioned on bursty traffic do not (nyc_departures: a spec chosen at 29 of 47 minutes
    read 40 of a 39-minute budget on the next fortnight). Outside the slack, the order is as before."""
    from autoscaler.backtest.tune import Knobs, Score, choose

    def k(target: str) -> Knobs:
        return Knobs(target, None, None, "given", "given")

    given = k("28")
    scores = [(k("34"), Score(100.0, 1740.0, 10, 50.0)),   # cheapest, near the edge of a 1974 s budget
              (k("33"), Score(101.5, 1680.0, 10, 50.0)),   # 1.5% dearer, a little more room
              (k("32"), Score(101.9, 900.0, 10, 50.0)),    # 1.9% dearer, much more room
              (k("31"), Score(102.5, 0.0, 10, 50.0)),      # 2.5% dearer: outside the slack
              (k("35"), Score(95.0, 2400.0, 10, 50.0)),    # cheaper but over the budget
              (given, Score(130.0, 2820.0, 10, 50.0))]
    assert [x.target for x, _ in choose(scores, 1974.0, given)] == ["34", "33", "32", "31", "35", "28"]
    assert [x.target for x, _ in choose(scores, 1974.0, given, 0.02)] == ["32", "33", "34", "31", "35", "28"]
    # nothing within the budget: the slack changes nothing (the least under-provisioned first)
    unchanged = [x.target for x, _ in choose(scores, -1.0, given)]
    assert [x.target for x, _ in choose(scores, -1.0, given, 0.02)] == unchanged
