"""The adapter's own /metrics, read by Prometheus' text parser after real requests: query time per
rule, the query cache's hits and coalesced waiters, Prometheus errors by kind, discovery per rule,
build info; no `_created` series and no family without a sample."""

from __future__ import annotations

import yaml
from prometheus_client.parser import text_string_to_metric_families

from ..manifests.monitoring import used_names
from .conftest import ROOT


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_adapter_self_metrics(adapter):
    for _ in range(3):
        url = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/web-1/http_requests"
        assert adapter.get(url).status_code == 200
    text = adapter.get("/metrics").text
    assert "_created" not in text
    found = _samples(text)
    rules = yaml.safe_load((ROOT / "tests" / "adapter" / "rules.yaml").read_text())
    paths = {f"rules[{i}]" for i in range(len(rules.get("rules") or ()))} | {
        f"externalRules[{i}]" for i in range(len(rules.get("externalRules") or ()))}
    per_rule = {lab["rule"]: v for lab, v in found["promscaler_adapter_rule_discovered_metrics"]}
    assert set(per_rule) == paths
    assert sum(per_rule.values()) >= 3 and all(v >= 0 for v in per_rule.values())
    discovery = {lab["rule"] for lab, v in found["promscaler_adapter_rule_discovery_duration_seconds_count"] if v >= 1}
    assert discovery == paths
    queried = {lab["rule"]: v for lab, v in found["promscaler_adapter_rule_query_duration_seconds_count"]}
    # repeated requests are answered from the kept answer, not through the rule again
    assert queried and set(queried) <= paths and sum(queried.values()) >= 1, queried
    hits = found["promscaler_adapter_query_cache_hits_total"][0][1]
    misses = found["promscaler_adapter_query_cache_misses_total"][0][1]
    assert misses >= 1 and hits + misses >= 1
    assert "promscaler_adapter_query_cache_coalesced_total" in found
    kinds = {lab["kind"] for lab, _ in found["promscaler_adapter_prometheus_errors_total"]}
    assert kinds == {"timeout", "unreachable", "bad_query", "bad_response", "server_error"}
    [(labels, one)] = found["promscaler_build_info"]
    assert one == 1 and labels["component"] == "adapter" and labels["version"]
    shipped = {n for n in used_names() if n.startswith("promscaler_adapter_")}  # the chart's alerts and dashboard
    assert len(shipped) >= 6 and shipped <= set(found), shipped - set(found)
    empty = [f.name for f in text_string_to_metric_families(text) if not f.samples]
    assert not empty, f"declared but never sampled: {empty}"
