"""The plan of a backtest or tune: the specs and the adapter's rules -> every PromQL to fetch.

The read path is plan (here: `plan_reading`), fetch (`history.Fetcher.read`), replay; `read`
strings them together for both commands. The only thing a plan needs from Prometheus, the metric
names a rule's seriesQuery finds, is handed in (`SeriesNames`, memoized by the caller: asked only
for the rules the search reaches).

A forecast metric can be asked with other settings than its rule's (`tune` tries horizons and
seasons): `ForecastSetting` names one, and a plan keeps the spec's queries under each. Season
sets the history before `--from` does not cover are left out before the fetch (`keep_covered`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from adapter.naming import CompiledRules, compile_rules
from adapter.podnames import owner_pattern
from adapter.rules import DiscoveryRule, RulesConfig, seasonal_misfit

from .before import Before, before_grid, covers, had_before, needed
from .history import Grid, Series
from .queries import MetricQuery, SeriesNames, actual_replicas_queries, forecast_name, metric_query
from .specs import Spec

__all__ = ["RULES", "ForecastSetting", "Plan", "Reading", "plan_reading", "pod_regex"]


@dataclass(frozen=True)
class ForecastSetting:
    """A forecast's horizon (seconds), seasons (seconds, longest first) and, for a seasonal one,
    options against noise (`Forecast` fields: `(("envelope", "max"),)`); None: the rule's own."""

    horizon: float | None = None
    seasons: tuple[float, ...] | None = None
    shape: tuple[tuple[str, object], ...] | None = None


RULES = ForecastSetting()  # every forecast as its rule declares it


@dataclass
class Plan:
    spec: Spec
    queries: list[MetricQuery]
    actual_queries: list[str]
    # with other forecast settings: the spec's queries, where a forecast metric's differs
    variants: dict[ForecastSetting, list[MetricQuery]] = field(default_factory=dict)
    # the first metric's forecast, when its rule declares one and the spec does not list it
    added: dict[ForecastSetting, MetricQuery] = field(default_factory=dict)

    def at(self, setting: ForecastSetting) -> list[MetricQuery]:
        """The spec's queries at a setting of `variants`, and the added forecast at it if any."""
        added = self.added.get(setting)
        return [*self.variants[setting], *([added] if added is not None else [])]

    def keep_covered(self, had: Callable[[str], float]) -> None:
        """Leave out the season sets whose forecasts have no value from --from on (`before.covers`;
        `had(base)`: the history before --from): they are neither fetched nor tried."""
        self.variants = {s: qs for s, qs in self.variants.items() if s.seasons is None or covers(self.at(s), had)}
        self.added = {s: q for s, q in self.added.items() if s == RULES or s in self.variants}

    def every_query(self) -> list[MetricQuery]:
        return [*self.queries, *(q for qs in self.variants.values() for q in qs), *self.added.values()]

    def promql(self) -> list[str]:
        """Every PromQL of the plan, the cluster's replicas included."""
        return [q.promql for q in self.every_query()] + self.actual_queries


def pod_regex(kind: str, name: str, given: str | None) -> str:
    """The target's pods in history: `--pod-regex`, else every pod its controller ever named, by
    Kubernetes' naming conventions (the adapter's rule for a Pods forecast: `adapter.podnames`)."""
    return given or owner_pattern(kind, name)


def with_setting(cfg: RulesConfig, setting: ForecastSetting) -> CompiledRules:
    """The rules with every forecast at `setting`: seasons for a seasonal one, the horizon for a
    linear one and for a seasonal one whose shortest season is longer, the shape for a seasonal one
    it fits (`seasonal_misfit`: the rules file would refuse it)."""
    def one(rule: DiscoveryRule) -> DiscoveryRule:
        f = rule.forecast
        if f is None:
            return rule
        if setting.seasons is not None and f.method == "seasonal":
            f = replace(f, seasons=setting.seasons)
        if setting.shape is not None and f.method == "seasonal":
            shaped = replace(f, **dict(setting.shape))  # type: ignore[arg-type]
            f = shaped if seasonal_misfit(shaped) is None else f   # a shape that does not fit is not applied
        if setting.horizon is not None and (f.method != "seasonal" or min(f.seasons) > setting.horizon):
            f = replace(f, horizon=setting.horizon)
        return replace(rule, forecast=f)
    return compile_rules(replace(cfg, rules=tuple(map(one, cfg.rules)),
                                 external_rules=tuple(map(one, cfg.external_rules))))


def make_plans(specs: Sequence[Spec], cfg: RulesConfig | None, series_names: SeriesNames,
               namespace: str | None, given_pod_regex: str | None, explicit: Mapping[str, str],
               settings: Sequence[ForecastSetting] = (), add_forecast: bool = False) -> list[Plan]:
    """Each spec's PromQL (and, for `settings`, its forecast metrics' PromQL at those settings;
    with `add_forecast`, the first metric's forecast when the spec does not list it); raises
    QueryError. `series_names`: the metric names of a rule's seriesQuery."""
    rules = compile_rules(cfg) if cfg is not None else None
    variants = {s: with_setting(cfg, s) for s in settings} if cfg is not None else {}

    def plan(s: Spec) -> Plan:
        ns = namespace or s.namespace or "default"
        ref = s.spec.scale_target_ref
        pods = pod_regex(ref.kind, ref.name, given_pod_regex)
        given = {**s.queries, **explicit}  # a ScaledObject's trigger queries, unless --query says otherwise

        def queries(at: CompiledRules | None) -> list[MetricQuery]:
            return [metric_query(ms, ns, pods, at, series_names, given) for ms in s.spec.metrics]

        out = Plan(s, queries(rules), actual_replicas_queries(ns, s.name, ref.kind, ref.name))
        first = s.spec.metrics[0]
        name = forecast_name(first, rules, series_names) if add_forecast and rules is not None else None
        added = None if name is None or any(ms.name == name for ms in s.spec.metrics) else replace(first, name=name)
        if added is not None:
            out.added[RULES] = metric_query(added, ns, pods, rules, series_names, {})
        for setting, at in variants.items():
            out.variants[setting] = queries(at)
            if added is not None:
                out.added[setting] = metric_query(added, ns, pods, at, series_names, {})
        return out

    return [plan(s) for s in specs]


@dataclass
class Reading:
    """What to read: every spec's plan over the replay's grid, and what their forecasts read
    before --from (each query a forecast is made of, on the window's step)."""

    plans: list[Plan]
    grid: Grid
    before: list[tuple[Before, Grid]]

    def keep_covered(self, before: Sequence[tuple[Before, Grid, Series]]) -> None:
        """`Plan.keep_covered` for every plan, by the history fetched before --from."""
        for p in self.plans:
            p.keep_covered(functools.partial(had_before, before))

    def promql(self) -> list[str]:
        """Every PromQL of every plan over the grid."""
        return [q for p in self.plans for q in p.promql()]


def plan_reading(specs: Sequence[Spec], cfg: RulesConfig | None, series_names: SeriesNames, grid: Grid,
                 namespace: str | None, given_pod_regex: str | None, explicit: Mapping[str, str],
                 settings: Sequence[ForecastSetting] = (), add_forecast: bool = False) -> Reading:
    """The specs' plans (`make_plans`) over `grid`, and the history before it their forecasts read."""
    plans = make_plans(specs, cfg, series_names, namespace, given_pod_regex, explicit, settings, add_forecast)
    before = [(b, before_grid(grid, b.seconds)) for b in needed(q for p in plans for q in p.every_query())]
    return Reading(plans, grid, before)
