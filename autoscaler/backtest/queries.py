"""Each spec metric's PromQL over history, derived from the adapter's rules file exactly as the
adapter translates a metrics API request: the adapter's own rule parser (`adapter.rules`),
naming (`adapter.naming`) and query builder (`adapter.promql`), imported here (they are pure
modules; nothing of the adapter's server comes along). Only the pods differ: a request names
the pods that exist now, history has pods that came and went, so a Pods metric selects the
target's pods by a name pattern (`<target>-.*` unless given).

A forecast metric (a rule's `forecast:` block) is asked with the adapter's own forecast PromQL
(`adapter.forecast.forecast_query`) around the same query, so the replay sees at each step what
the adapter would have served then; a Pods forecast is the forecast of the pods' total (one
series), which the load model spreads over the simulated ready pods as it does an observed total.

Kinds of query (`MetricQuery.shape`):
- `per-pod`: one series per pod (Pods; Resource when given explicitly): the load model sums them
  into the observed total and counts them as the observed pods;
- `total`: every series summed (External, Object), taken as observed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from adapter.forecast import forecast_query
from adapter.naming import BUILTIN_TABLE, NAMESPACES, CompiledRule, CompiledRules, resource_by_api_name
from adapter.promql import QueryBuildError, external_query, quote, resource_query, workload_query
from adapter.rules import Forecast
from autoscaler.decision.spec import MetricSpec
from promscaler.selectors import Selector

__all__ = ["MetricQuery", "QueryError", "actual_replicas_queries", "forecast_name", "metric_query"]

Shape = Literal["per-pod", "total"]
SeriesNames = Callable[[str], list[str]]  # seriesQuery -> the series names Prometheus has for it


class QueryError(ValueError):
    """A metric whose history cannot be asked for; the message names the metric and what to give."""


@dataclass(frozen=True)
class MetricQuery:
    metric: MetricSpec
    promql: str
    shape: Shape
    source: str            # "rules[0]", "externalRules[1]" or "--query"
    forecast: Forecast | None = None  # a rule's forecast: not an observed load
    base: str = ""         # a forecast's: the query it forecasts (`forecast_query(forecast, base)` is `promql`)


def _series_for(rules: tuple[CompiledRule, ...], metric: str,
                series_names: SeriesNames) -> tuple[CompiledRule, str, Forecast | None] | None:
    """The first rule (in file order, as the adapter's discovery keeps the first) with a series
    that becomes `metric`, and the forecast when `metric` is a rule's forecast (metrics first,
    as in discovery)."""
    for forecasts in (False, True):
        for rule in rules:
            if forecasts and rule.rule.forecast is None:
                continue
            for series in sorted(series_names(rule.series_query)):
                name = rule.forecast_name(series) if forecasts else rule.metric_name(series)
                if rule.accepts(series) and name == metric:
                    return rule, series, rule.rule.forecast if forecasts else None
    return None


def _query(ms: MetricSpec, promql: str, shape: Shape, source: str, forecast: Forecast | None) -> MetricQuery:
    """The metric's query, or its forecast (keeping the query it is made of, to re-make it with
    other forecast settings)."""
    if forecast is None:
        return MetricQuery(ms, promql, shape, source)
    return MetricQuery(ms, forecast_query(forecast, promql), shape, source, forecast, promql)


def metric_query(ms: MetricSpec, namespace: str, pod_regex: str, rules: CompiledRules | None,
                 series_names: SeriesNames, explicit: Mapping[str, str]) -> MetricQuery:
    label = f"{ms.type} metric {ms.name}"
    if ms.name in explicit:
        shape: Shape = "per-pod" if ms.type in ("Pods", "Resource", "ContainerResource") else "total"
        return MetricQuery(ms, explicit[ms.name], shape, "--query")
    if ms.type in ("Resource", "ContainerResource"):
        raise QueryError(f"{label}: resource metrics come from metrics.k8s.io, not from the rules: "
                         f"give --query {ms.name}=PROMQL (one series per pod)")
    if rules is None:
        raise QueryError(f"{label}: give --rules RULES.yaml (the adapter's rules) or --query {ms.name}=PROMQL")
    selector = ms.selector or Selector()
    try:
        if ms.type == "External":
            found = _series_for(rules.external_rules, ms.name, series_names)
            if found is None:
                raise QueryError(f"{label}: no externalRules series in Prometheus becomes this metric")
            rule, series, forecast = found
            ns_label = rule.converter.label_for_resource(NAMESPACES)
            if rule.namespaced and ns_label is None:
                ns_label = "namespace"  # as the adapter does for a namespaced external rule without a mapping
            promql = external_query(rule, series, ns_label, namespace, selector)
            return _query(ms, promql, "total", f"externalRules[{rule.index}]", forecast)
        found = _series_for(rules.rules, ms.name, series_names)
        if found is None:
            raise QueryError(f"{label}: no rules series in Prometheus becomes this metric")
        rule, series, forecast = found
        ns_label = rule.converter.label_for_resource(NAMESPACES)
        if ms.type == "Object":
            ref = ms.described_object
            assert ref is not None
            resource = next((r for r in BUILTIN_TABLE.resources if r.kind == ref.kind), None)
            res_label = rule.converter.label_for_resource(resource) if resource else None
            if resource is None or res_label is None:
                raise QueryError(f"{label}: rules[{rule.index}] has no label for {ref.kind}")
            promql = resource_query(rule, series, res_label, ns_label, namespace if resource.namespaced else None,
                                    [ref.name], selector)
            return _query(ms, promql, "total", f"rules[{rule.index}]", forecast)
        pods = resource_by_api_name("pods")
        pod_label = rule.converter.label_for_resource(pods) if pods else None
        if pod_label is None:
            raise QueryError(f"{label}: rules[{rule.index}] has no label for pods")
        pods_query = workload_query(rule, series, pod_label, ns_label, namespace, pod_regex, selector)
        if forecast is not None:  # the forecast of the pods' total, as the adapter makes it
            pods_query = f"sum({pods_query})"
        return _query(ms, pods_query, "per-pod", f"rules[{rule.index}]", forecast)
    except QueryBuildError as exc:
        raise QueryError(f"{label}: {exc}") from None


def actual_replicas_queries(namespace: str, autoscaler: str, target_kind: str, target: str) -> list[str]:
    """kube-state-metrics series that tell the cluster's replicas, best first."""
    ns = quote(namespace)
    out = [f"max(kube_horizontalpodautoscaler_status_current_replicas{{namespace={ns},"
           f"horizontalpodautoscaler={quote(autoscaler)}}})"]
    if target_kind == "Deployment":
        out.append(f"max(kube_deployment_status_replicas{{namespace={ns},deployment={quote(target)}}})")
    return out


def forecast_name(ms: MetricSpec, rules: CompiledRules, series_names: SeriesNames) -> str | None:
    """The name the adapter serves `ms`'s forecast under, when the rule `ms` comes from declares
    one (`tune` offers to add it to a spec); None otherwise."""
    if ms.type not in ("Pods", "Object", "External"):
        return None
    found = _series_for(rules.external_rules if ms.type == "External" else rules.rules, ms.name, series_names)
    if found is None or found[2] is not None or found[0].rule.forecast is None:
        return None
    return found[0].forecast_name(found[1])
