"""What the operator needs to see at start-up and after a reload: per rule, the series it matched and
the metrics it yields (a warning for a rule that matches nothing), and each `metricsQuery`
rendered with sample values and parsed by Prometheus itself, so a broken template is reported
naming its rule rather than found at the first request as a 500."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from adapter.forecast import forecast_query
from adapter.naming import KNOWN_RESOURCES, NAMESPACES, CompiledRule, CompiledRules
from adapter.prometheus import PrometheusClient, PrometheusQueryError, PrometheusUnavailable
from adapter.promql import QueryBuildError, render_query
from promscaler.logs import vlog

__all__ = ["RuleSummary", "check_queries", "log_summary", "sample_query", "summarize"]

log = logging.getLogger("adapter.rules")


@dataclass(frozen=True)
class RuleSummary:
    rule: CompiledRule
    series: int  # series (or, with aggregated discovery, distinct series names) the rule accepted
    metrics: tuple[str, ...]  # "pods/http_requests", or the external metric's name


def summarize(rules: CompiledRules, series_by_query: Mapping[str, Sequence[Mapping[str, str]]],
              catalogue) -> list[RuleSummary]:  # catalogue: adapter.discovery.Catalogue
    """Pure: per rule, how much of what Prometheus listed it took, and what it serves."""
    served: dict[int, list[str]] = {}
    for (resource, metric), found in catalogue.custom.items():
        served.setdefault(id(found.rule), []).append(f"{resource}/{metric}")
    for metric, found in catalogue.external.items():
        served.setdefault(id(found.rule), []).append(metric)
    out = []
    for rule in rules.all:
        accepted = sum(1 for labels in series_by_query.get(rule.series_query, ())
                       if (name := labels.get("__name__")) and rule.accepts(name) and rule.metric_name(name))
        out.append(RuleSummary(rule, accepted, tuple(sorted(served.get(id(rule), ())))))
    return out


def log_summary(summaries: Sequence[RuleSummary]) -> None:
    if not summaries:
        log.warning("the rules file has no rules: no custom or external metrics will be served")
        return
    for s in summaries:
        where = f"{s.rule.rule.path} (seriesQuery {s.rule.series_query!r})"
        if not s.series:
            log.warning("%s matched no series in Prometheus: it serves no metrics", where)
        elif not s.metrics:
            log.warning("%s matched %d series but serves no metrics (no label maps to a resource?)", where, s.series)
        else:
            shown = ", ".join(s.metrics[:5]) + (f", ... ({len(s.metrics) - 5} more)" if len(s.metrics) > 5 else "")
            log.info("%s: %d series, %d metrics: %s", where, s.series, len(s.metrics), shown)


def sample_query(rule: CompiledRule) -> str:
    """The rule's metricsQuery as a request would render it, with sample values."""
    series = rule.series_query.split("{")[0].strip() or "sample_metric"
    if not series.replace("_", "a").replace(":", "a").isalnum():
        series = "sample_metric"
    ns_label = rule.converter.label_for_resource(NAMESPACES) or "namespace"
    matchers: list[tuple[str, str, tuple[str, ...]]] = [(ns_label, f'{ns_label}="default"', ("default",))]
    group_by: list[str] = []
    if not rule.external:
        label = rule.converter.label_for_resource(KNOWN_RESOURCES[0]) or "pod"
        matchers.append((label, f'{label}=~"sample-0|sample-1"', ("sample-0", "sample-1")))
        group_by = [label]
    return render_query(rule, series, matchers, group_by)


async def check_queries(rules: CompiledRules, prometheus: PrometheusClient) -> list[str]:
    """Each rule's rendered metricsQuery parsed by Prometheus; the problems, each naming its rule,
    are logged as errors and returned. A backend without `/api/v1/format_query` is not checked."""

    async def check(rule: CompiledRule) -> str | None:
        try:
            query = sample_query(rule)
        except (QueryBuildError, ValueError) as exc:
            return f"{rule.rule.path}.metricsQuery cannot be rendered: {exc}"
        checks = [(f"{rule.rule.path}.metricsQuery", query)]
        if rule.rule.forecast is not None:  # its PromQL is built around the metricsQuery: checked likewise
            checks.append((rule.rule.forecast.path, forecast_query(rule.rule.forecast, query)))
        for where, text in checks:
            try:
                await prometheus.format_query(text)
            except PrometheusQueryError as exc:
                return f"{where} does not parse in Prometheus: {exc} (rendered: {text})"
            except PrometheusUnavailable as exc:  # down, or no format_query (Thanos, older versions): not checked
                vlog(log, 2, "%s not checked: %s", where, exc)
                return None
        return None

    problems = [p for p in await asyncio.gather(*(check(r) for r in rules.all)) if p]
    for problem in problems:
        log.error("%s", problem)
    return problems
