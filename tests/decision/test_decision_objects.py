"""autoscaler.objects: API objects -> the decision model, as the Kubernetes HPA metrics client reads them."""

from __future__ import annotations

import pytest

from autoscaler.decision import ExternalReading, MetricFailure, ObjectReading, PodReading
from autoscaler.decision.spec import parse_spec
from autoscaler.objects import (
    ObjectError,
    external_metric_reading,
    object_metric_reading,
    pod_info,
    pod_labels,
    pod_metrics_reading,
    pods_metric_reading,
    scale_selector,
)
from autoscaler.simulate.scenario import _answer_external, _answer_object, _answer_pods
from promscaler import logs
from promscaler.times import parse_time

REF = {"kind": "Deployment", "name": "web"}


def metric(m: dict):
    return parse_spec({"scaleTargetRef": REF, "maxReplicas": 5, "minReplicas": 1, "metrics": [m]}).metrics[0]


POD = {
    "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
    "spec": {
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}},
                       {"name": "proxy", "resources": {"requests": {"cpu": "100m"}}}],
        "initContainers": [{"name": "setup", "resources": {"requests": {"cpu": "2"}}},
                           {"name": "log-shipper", "restartPolicy": "Always",
                            "resources": {"requests": {"cpu": "50m"}}}],
    },
    "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
               "conditions": [{"type": "PodScheduled", "status": "True"},
                              {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:20Z"}]},
}


def test_pod_info_reads_requests_readiness_and_times() -> None:
    p = pod_info(POD)
    assert p.name == "web-1" and p.phase == "Running" and p.ready and p.ready_condition == "True"
    assert p.start_time == parse_time("2026-01-01T00:00:00Z")
    assert p.ready_transition == parse_time("2026-01-01T00:00:20Z")
    # containers plus the restartable (sidecar) init container; the plain init container does not count
    assert p.requests == {"app": {"cpu": 500, "memory": 256 * 2**20 * 1000}, "proxy": {"cpu": 100},
                          "log-shipper": {"cpu": 50}}
    assert p.request_totals == {"cpu": 650}  # memory is not requested by every container
    assert not p.deleted and p.pod_requests is None


def test_pod_info_deleted_unready_pod_level() -> None:
    p = pod_info({"metadata": {"name": "x", "deletionTimestamp": "2026-01-01T00:05:00Z"},
                  "spec": {"resources": {"requests": {"cpu": "2"}}, "containers": [{"name": "a"}]},
                  "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}})
    assert p.deleted and p.gone and not p.ready and p.ready_condition == "False"
    assert p.pod_requests == {"cpu": 2000} and p.request_totals == {"cpu": 2000}
    none = pod_info({"metadata": {"name": "y"}, "status": {"phase": "Pending"}})
    assert none.ready_condition is None and not none.normal


def test_pod_info_errors_have_paths() -> None:
    bad = {"metadata": {"name": "x"},
           "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}}
    with pytest.raises(ObjectError, match=r"spec\.containers\[0\]\.resources\.requests\.cpu: not a quantity"):
        pod_info(bad)
    with pytest.raises(ObjectError, match=r"metadata\.name: required"):
        pod_info({"metadata": {}})


def pm(name: str, containers: list[dict], ts: str = "2026-01-01T00:09:45Z", window: str = "30s") -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "timestamp": ts, "window": window,
            "containers": containers}


def test_pod_metrics_sum_containers_and_skip_incomplete_pods() -> None:
    items = [
        pm("a", [{"name": "app", "usage": {"cpu": "250m"}}, {"name": "proxy", "usage": {"cpu": "50m"}}]),
        # lacks cpu
        pm("b", [{"name": "app", "usage": {"cpu": "100m"}}, {"name": "proxy", "usage": {"memory": "1Mi"}}]),
        pm("c", []),  # no containers: missing
    ]
    r = pod_metrics_reading(items, "cpu")
    assert isinstance(r, PodReading) and set(r.samples) == {"a"}
    assert r.samples["a"].milli == 300 and r.samples["a"].window == 30.0
    assert r.samples["a"].timestamp == parse_time("2026-01-01T00:09:45Z")


def test_pod_metrics_one_container_and_its_absence(caplog) -> None:
    items = [pm("a", [{"name": "app", "usage": {"cpu": "250m"}}, {"name": "proxy", "usage": {"cpu": "50m"}}]),
             pm("b", [{"name": "web", "usage": {"cpu": "70m"}}])]
    r = pod_metrics_reading(items, "cpu", "proxy")
    assert isinstance(r, PodReading) and r.samples["a"].milli == 50 and "b" not in r.samples
    # Kubernetes 1.36's getContainerMetrics: a pod without the container is missing, logged at V(2).
    caplog.set_level(logs.level(2), logger="autoscaler.objects")
    r = pod_metrics_reading(items, "cpu", "web")
    assert isinstance(r, PodReading) and {k: v.milli for k, v in r.samples.items()} == {"b": 70}
    assert [(rec.levelno, rec.getMessage()) for rec in caplog.records] == [
        (logs.level(2), "Missing container metric container=web pod=default/a")]
    assert isinstance(pod_metrics_reading([], "cpu"), MetricFailure)


def cm(pod: str, name: str, value: str, v1beta1: bool = False, selector: dict | None = None, kind: str = "Pod") -> dict:
    described = {"kind": kind, "name": pod, "namespace": "default", "apiVersion": "/v1"}
    if v1beta1:
        item = {"describedObject": described, "metricName": name, "timestamp": "2026-01-01T00:09:50Z", "value": value}
        if selector:
            item["selector"] = selector
        return item
    ident = {"name": name}
    if selector:
        ident["selector"] = selector
    return {"describedObject": described, "metric": ident, "timestamp": "2026-01-01T00:09:50Z",
            "windowSeconds": 30, "value": value}


def test_pods_metric_matching_rules_both_versions() -> None:
    spec = metric({"type": "Pods",
                   "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1"}}})
    items = [cm("a", "qps", "1500m"), cm("b", "qps", "2", v1beta1=True), cm("c", "qps", "9"),  # c: not a target pod
             cm("a", "latency", "7"), cm("b", "qps", "5", selector={"matchLabels": {"x": "y"}}),  # other selector
             cm("svc", "qps", "3", kind="Service")]
    r = pods_metric_reading(_answer_pods(items, spec), "qps", ["a", "b"])
    assert isinstance(r, PodReading)
    assert {k: v.milli for k, v in r.samples.items()} == {"a": 1500, "b": 2000}
    assert r.samples["a"].window == 30.0 and r.samples["b"].window == 60.0  # v1beta1 item without window: 1 minute
    sel = metric({"type": "Pods", "pods": {"metric": {"name": "qps", "selector": {"matchLabels": {"x": "y"}}},
                                           "target": {"type": "AverageValue", "averageValue": "1"}}})
    r2 = pods_metric_reading(_answer_pods(items, sel), "qps", ["a", "b"])
    assert {k: v.milli for k, v in r2.samples.items()} == {"b": 5000}
    assert isinstance(pods_metric_reading([], "qps", ["a"]), MetricFailure)
    # The live controller takes the API's answer as it is: no second selector check.
    assert {k: v.milli for k, v in pods_metric_reading(items[4:5], "qps").samples.items()} == {"b": 5000}


def test_object_metric_matching() -> None:
    spec = metric({"type": "Object", "object": {"describedObject": {"apiVersion": "v1", "kind": "Service",
                                                                    "name": "svc"},
                                                "metric": {"name": "hits"}, "target": {"type": "Value", "value": "1"}}})
    items = [cm("svc", "hits", "4", kind="Ingress"), cm("other", "hits", "5", kind="Service"),
             {**cm("svc", "hits", "6", kind="Service"),
              "describedObject": {"kind": "Service", "name": "svc", "apiVersion": "v1"}}]
    r = object_metric_reading(_answer_object(items, spec), "hits", "Service", "svc")
    assert isinstance(r, ObjectReading) and r.milli == 6000
    assert _answer_object(items[:2], spec) == []
    assert isinstance(object_metric_reading([], "hits", "Service", "svc"), MetricFailure)
    # "/v1" (as servers write core objects) and "v1" (as specs do) are the same group version.
    core = {**items[2], "describedObject": {"kind": "Service", "name": "svc", "apiVersion": "/v1"}}
    assert _answer_object([core], spec) == [core]


def test_external_metric_matching_and_sum() -> None:
    spec = metric({"type": "External", "external": {
        "metric": {"name": "queue",
                   "selector": {"matchExpressions": [{"key": "q", "operator": "In", "values": ["a", "b"]}]}},
        "target": {"type": "Value", "value": "1"}}})
    items = [{"metricName": "queue", "metricLabels": {"q": "a"}, "timestamp": "2026-01-01T00:09:50Z", "value": "10"},
             {"metricName": "queue", "metricLabels": {"q": "b", "x": "1"}, "timestamp": "2026-01-01T00:09:55Z",
              "value": "2500m"},
             {"metricName": "queue", "metricLabels": {"q": "c"}, "timestamp": "2026-01-01T00:09:50Z", "value": "99"},
             {"metricName": "other", "metricLabels": {"q": "a"}, "timestamp": "2026-01-01T00:09:50Z", "value": "99"}]
    r = external_metric_reading(_answer_external(items, spec))
    assert isinstance(r, ExternalReading) and sorted(r.millis) == [2500, 10000]
    assert r.timestamp == parse_time("2026-01-01T00:09:55Z")
    assert _answer_external(items[2:], spec) == []
    assert isinstance(external_metric_reading([]), MetricFailure)
    # Series without labels (an adapter's `sum(...) by ()`) count as answered: Kubernetes sums them all.
    bare = [{"metricName": "queue", "metricLabels": {}, "value": "7"},
            {"metricName": "queue", "metricLabels": {}, "value": "3"}]
    assert external_metric_reading(bare).millis == (7000, 3000)


def test_scale_selector() -> None:
    sel, err = scale_selector({"status": {"selector": "app=web,tier in (a,b)"}})
    assert err is None and sel.matches({"app": "web", "tier": "a"}) and not sel.matches({"app": "web"})
    assert scale_selector({"status": {}}) == (None, "the HPA target's scale is missing a selector")
    assert scale_selector({"status": {"selector": "app in (a"}})[1].startswith("couldn't convert selector")


def test_metrics_api_values_out_of_range_are_errors_with_their_path() -> None:
    # The live controller turns these into a MetricFailure (ScalingActive False), never a crashed sync.
    with pytest.raises(ObjectError, match=r"\[0\].containers\[0\].usage.cpu: out of range"):
        pod_metrics_reading([pm("a", [{"name": "app", "usage": {"cpu": "1e400"}}])], "cpu")
    with pytest.raises(ObjectError, match=r"\[0\].timestamp: out of range"):
        pod_metrics_reading([pm("a", [{"name": "app", "usage": {"cpu": "1"}}], ts="0001-01-01T00:00:00Z")], "cpu")
    with pytest.raises(ObjectError, match=r"\[0\].value: out of range"):
        external_metric_reading([{"metricName": "q", "value": "-1e400"}])
    with pytest.raises(ObjectError, match=r"\[0\].window: out of range"):
        pod_metrics_reading([pm("a", [{"name": "app", "usage": {"cpu": "1"}}], window="100000000000000000s")], "cpu")
    with pytest.raises(ObjectError, match=r"metadata\.labels: must map strings to strings"):
        pod_labels({"metadata": {"labels": {"app": 1.5}}})
