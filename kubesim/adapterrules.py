"""prometheus-adapter rules as users write them, for the workloads the sandbox's tests and benchmarks
serve (data, not the adapter's code: the adapter parses them as it would a user's file)."""

from __future__ import annotations

from typing import Any

__all__ = ["counter_rate_rule", "gauge_rule"]


def _overrides(labels: tuple[str, ...]) -> dict[str, Any]:
    return {"overrides": {label: {"resource": label} for label in labels}}


def counter_rate_rule(series_query: str, window: str = "1m") -> dict[str, Any]:
    """The per-pod request-rate rule of prometheus-adapter's walkthrough: a `*_total` counter's rate
    over `window`, named without `_total`; one spelling for every test and benchmark that serves one."""
    return {
        "seriesQuery": series_query,
        "resources": _overrides(("namespace", "pod")),
        "name": {"matches": "^(.*)_total$", "as": "${1}"},
        "metricsQuery": f"sum(rate(<<.Series>>{{<<.LabelMatchers>>}}[{window}])) by (<<.GroupBy>>)",
    }


def gauge_rule(series_query: str, labels: tuple[str, ...] = ("namespace", "pod")) -> dict[str, Any]:
    """A gauge served as it is, summed by the request's grouping, each of `labels` naming its own
    resource (`("namespace",)` for an External metric's rule, a queue's length)."""
    return {
        "seriesQuery": series_query,
        "resources": _overrides(labels),
        "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
    }
