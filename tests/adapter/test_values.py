"""Every value path, both custom-metrics versions and external metrics, against a real Prometheus.
Expected values come from asking Prometheus the equivalent PromQL directly."""

from __future__ import annotations

import pytest

from .conftest import approx

C = "/apis/custom.metrics.k8s.io"
E = "/apis/external.metrics.k8s.io/v1beta1"
WEB_RATE = 'sum(rate(http_requests_total{namespace="web",pod!=""}[1m])) by (pod)'


def items(resp) -> list[dict]:
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    return resp.json()["items"]


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_one_pod_by_name(adapter, promql, version):
    body = adapter.get(f"{C}/{version}/namespaces/web/pods/web-2/http_requests").json()
    assert body["kind"] == "MetricValueList" and body["apiVersion"] == f"custom.metrics.k8s.io/{version}"
    [item] = body["items"]
    assert item["describedObject"] == {"kind": "Pod", "name": "web-2", "namespace": "web", "apiVersion": "/v1"}
    assert approx(item["value"], promql.by(WEB_RATE, "pod")["web-2"])
    if version == "v1beta1":
        assert item["metricName"] == "http_requests" and item["window"] == 60 and "metric" not in item
    else:
        assert item["metric"] == {"name": "http_requests"} and item["windowSeconds"] == 60 and "metricName" not in item
    assert item["timestamp"].endswith("Z")


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_wildcard_names_come_from_prometheus(adapter, promql, version):
    # the aggregator percent-encodes the wildcard and prefers protobuf: the answer is JSON
    resp = adapter.get(f"{C}/{version}/namespaces/web/pods/%2A/http_requests",
                       headers={"Accept": "application/vnd.kubernetes.protobuf, */*"})
    got = {i["describedObject"]["name"]: i["value"] for i in items(resp)}
    expected = promql.by(WEB_RATE, "pod")
    assert set(got) == set(expected) == {"web-1", "web-2", "web-3", "web-old"}
    assert all(approx(got[p], expected[p]) for p in expected)


def test_other_namespace_is_not_mixed_in(adapter, promql):
    got = items(adapter.get(f"{C}/v1beta2/namespaces/shop/pods/*/http_requests"))
    assert [i["describedObject"]["name"] for i in got] == ["shop-1"]
    assert approx(got[0]["value"], promql.vector('sum(rate(http_requests_total{namespace="shop"}[1m]))')[0][1])


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_metric_label_selector_narrows_series(adapter, promql, version):
    all_methods = items(adapter.get(f"{C}/{version}/namespaces/web/pods/web-1/http_requests"))[0]["value"]
    post = items(adapter.get(f"{C}/{version}/namespaces/web/pods/web-1/http_requests",
                             params={"metricLabelSelector": "method in (POST)"}))[0]
    expected = promql.vector('sum(rate(http_requests_total{namespace="web",pod="web-1",method="POST"}[1m]))')[0][1]
    assert approx(post["value"], expected)
    assert not approx(all_methods, expected)
    selector = post["selector"] if version == "v1beta1" else post["metric"]["selector"]
    assert selector == {"matchExpressions": [{"key": "method", "operator": "In", "values": ["POST"]}]}


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_root_scoped_node(adapter, promql, version):
    [item] = items(adapter.get(f"{C}/{version}/nodes/node-1/node_load"))
    assert item["describedObject"] == {"kind": "Node", "name": "node-1", "apiVersion": "/v1"}
    assert approx(item["value"], promql.by("node_load", "node")["node-1"])
    both = items(adapter.get(f"{C}/{version}/nodes/*/node_load"))
    assert {i["describedObject"]["name"] for i in both} == {"node-1", "node-2"}


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_namespace_metric_path(adapter, promql, version):
    [item] = items(adapter.get(f"{C}/{version}/namespaces/shop/metrics/namespace_quota_used"))
    assert item["describedObject"] == {"kind": "Namespace", "name": "shop", "apiVersion": "/v1"}
    assert item["value"] == "1536" and approx(item["value"], promql.by("namespace_quota_used", "namespace")["shop"])
    # the same object through the root-scoped path form
    [again] = items(adapter.get(f"{C}/{version}/namespaces/shop/namespace_quota_used"))
    assert again["value"] == item["value"]


def test_namespaces_resource_aggregates_a_pod_metric(adapter, promql):
    [item] = items(adapter.get(f"{C}/v1beta2/namespaces/web/metrics/http_requests"))
    assert approx(item["value"], promql.vector('sum(rate(http_requests_total{namespace="web"}[1m]))')[0][1])


def test_template_with_group_maps_deployments(adapter, promql):
    [item] = items(adapter.get(f"{C}/v1beta2/namespaces/web/deployments.apps/frontend/deployment_queue_depth"))
    assert item["describedObject"] == {"kind": "Deployment", "name": "frontend", "namespace": "web",
                                       "apiVersion": "apps/v1"}
    assert item["value"] == "12500m" and approx(item["value"], promql.vector("deployment_queue_depth")[0][1])
    assert "windowSeconds" not in item  # a gauge rule has no rate range


def test_series_filters_and_name_as(adapter, promql):
    processed = items(adapter.get(f"{C}/v1beta2/namespaces/batch/pods/worker-1/jobs_processed_per_second"))[0]
    assert processed["windowSeconds"] == 120
    assert approx(processed["value"], promql.vector("sum(rate(jobs_processed_total[2m]))")[0][1])
    failed = items(adapter.get(f"{C}/v1beta2/namespaces/batch/pods/worker-1/jobs_failed_per_second"))[0]
    assert approx(failed["value"], promql.vector("sum(rate(jobs_failed_total[2m]))")[0][1])
    # isNot dropped the seconds counter from rule 1; rule 2 (is) names it busy_ratio
    gone = adapter.get(f"{C}/v1beta2/namespaces/batch/pods/worker-1/jobs_processed_seconds_per_second")
    assert gone.status_code == 404
    busy = items(adapter.get(f"{C}/v1beta2/namespaces/batch/pods/worker-1/busy_ratio"))[0]
    assert approx(busy["value"], promql.vector("sum(rate(jobs_processed_seconds_total[1m]))")[0][1])


def _external(adapter, ns: str, metric: str, selector: str | None = None) -> list[dict]:
    params = {"labelSelector": selector} if selector is not None else {}
    resp = adapter.get(f"{E}/namespaces/{ns}/{metric}", params=params)
    assert resp.json()["kind"] == "ExternalMetricValueList"
    return items(resp)


def test_external_namespaced_rule_adds_namespace(adapter, promql):
    [web] = _external(adapter, "web", "queue_messages_ready", "queue=orders")
    assert web["metricName"] == "queue_messages_ready" and web["metricLabels"] == {}
    assert approx(web["value"], promql.vector('sum(queue_messages_ready{namespace="web",queue="orders"})')[0][1])
    [shop] = _external(adapter, "shop", "queue_messages_ready", "queue=orders")
    assert approx(shop["value"], 100)


SELECTOR_CASES = [
    ("queue=orders", 'queue="orders"'),
    ("queue==orders", 'queue="orders"'),
    ("queue!=orders", 'queue!="orders"'),
    ("queue in (orders,payments)", 'queue=~"orders|payments"'),
    ("queue notin (orders)", 'queue!~"orders"'),
    ("queue", 'queue!=""'),
    ("!queue", 'queue=""'),
    ("queue in (orders),queue!=payments", 'queue="orders",queue!="payments"'),
]


@pytest.mark.parametrize("selector,matchers", SELECTOR_CASES)
def test_every_selector_operator(adapter, promql, selector, matchers):
    got = _external(adapter, "web", "queue_messages_ready", selector)
    expected = promql.vector(f'sum(queue_messages_ready{{namespace="web",{matchers}}})')
    assert len(got) == len(expected)
    for item, (_, value) in zip(got, expected, strict=True):
        assert approx(item["value"], value)


def test_external_not_namespaced_rule_one_item_per_series(adapter, promql):
    got = _external(adapter, "anything", "cluster_queue")
    expected = {m["region"]: v for m, v in promql.vector("sum(cluster_queue_depth) by (queue, region)")}
    assert {i["metricLabels"]["region"]: i["value"] for i in got}.keys() == expected.keys()
    for i in got:
        assert i["metricLabels"]["queue"] == "global" and approx(i["value"], expected[i["metricLabels"]["region"]])
    [us] = _external(adapter, "default", "cluster_queue", "region=us")
    assert approx(us["value"], expected["us"])


def test_selector_matching_nothing_is_an_empty_list(adapter):
    assert _external(adapter, "web", "queue_messages_ready", "queue=nonexistent") == []
    assert items(adapter.get(f"{C}/v1beta2/namespaces/nowhere/pods/*/http_requests")) == []


def test_namespaced_resource_at_cluster_scope_spans_namespaces(adapter, promql):
    got = {i["describedObject"]["name"]: i for i in items(adapter.get(f"{C}/v1beta2/pods/*/http_requests"))}
    expected = promql.by('sum(rate(http_requests_total{pod!=""}[1m])) by (pod)', "pod")
    assert got.keys() == expected.keys() and "shop-1" in got and "web-1" in got
    assert all(approx(got[p]["value"], expected[p]) for p in expected)
