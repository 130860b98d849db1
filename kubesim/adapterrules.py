"""prometheus-adapter rules as users write them, for the workloads the sandbox's tests and benchmarks
serve (data, not the adapter's code: the adapter parses them as it would a user's file)."""

from __future__ import annotations

from typing import Any

__all__ = ["counter_rate_rule"]


def counter_rate_rule(series_query: str, window: str = "1m") -> dict[str, Any]:
    """The per-pod request-rate rule of prometheus-adapter's walkthrough: a `*_total` counter's rate
    over `window`, named without `_total`; one spelling for every test and benchmark that serves one."""
    return {
        "seriesQuery": series_query,
        "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
        "name": {"matches": "^(.*)_total$", "as": "${1}"},
        "metricsQuery": f"sum(rate(<<.Series>>{{<<.LabelMatchers>>}}[{window}])) by (<<.GroupBy>>)",
    }
