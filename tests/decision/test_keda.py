"""KEDA ScaledObjects read as KEDA turns them into an HPA (autoscaler/decision/keda.py).

The objects are KEDA's documentation's (keda.sh "Prometheus" scaler example, "ScaledObject
specification", "CPU" and "Memory" scalers), and the HPAs expected are worked by hand from what
KEDA's code does (kedacore/keda controllers/keda/hpa.go, pkg/scalers/prometheus_scaler.go,
cpu_memory_scaler.go, GenerateMetricNameWithIndex): name `keda-hpa-<name>`, External metric
`s<trigger index>-prometheus` selected by `scaledobject.keda.sh/name`, the threshold as an
AverageValue in milli-units, minReplicas max(minReplicaCount, 1), maxReplicas 100 by default,
metrics sorted by type."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from autoscaler.backtest import specs
from autoscaler.decision import keda
from autoscaler.decision.controls import KedaScaling
from autoscaler.decision.fields import SpecError
from autoscaler.decision.keda import read_scaled_object, write_scaled_object
from autoscaler.decision.model import Pause

# keda.sh/docs/2.13/scalers/prometheus, "Example" (threshold and activation from its trigger specification)
PROMETHEUS: dict[str, Any] = {
    "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
    "metadata": {"name": "prometheus-scaledobject", "namespace": "default"},
    "spec": {"scaleTargetRef": {"name": "my-deployment"}, "triggers": [{"type": "prometheus", "metadata": {
        "serverAddress": "http://<prometheus-host>:9090",
        "threshold": "100.50", "activationThreshold": "5.5",
        "query": 'sum(rate(http_requests_total{deployment="my-deployment"}[2m]))'}}]},
}


def _with(**spec: Any) -> dict[str, Any]:
    doc = copy.deepcopy(PROMETHEUS)
    doc["spec"].update(spec)
    return doc


def test_the_docs_prometheus_example_is_the_hpa_keda_creates() -> None:
    so = read_scaled_object(PROMETHEUS)
    assert so.hpa == {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "keda-hpa-prometheus-scaledobject", "namespace": "default", "labels": {
            "app.kubernetes.io/name": "keda-hpa-prometheus-scaledobject",
            "app.kubernetes.io/part-of": "prometheus-scaledobject", "app.kubernetes.io/managed-by": "keda-operator"}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "my-deployment"},
            "minReplicas": 1, "maxReplicas": 100,   # minReplicaCount 0 -> the HPA's 1; maxReplicaCount 100
            "metrics": [{"type": "External", "external": {
                "metric": {"name": "s0-prometheus",
                           "selector": {"matchLabels": {"scaledobject.keda.sh/name": "prometheus-scaledobject"}}},
                "target": {"type": "AverageValue", "averageValue": "100500m"}}}]},   # 100.50 x 1000 milli
    }
    # what promscaler decides with: scale to zero from KEDA (minReplicaCount 0), activation 5.5,
    # cooldownPeriod 300 s and pollingInterval 30 s by default
    assert so.spec.min_replicas == 0 and so.spec.max_replicas == 100
    metric = so.spec.metrics[0]
    assert (metric.name, metric.activation_milli, metric.target.average_value_milli) == ("s0-prometheus", 5500, 100500)
    assert so.spec.controls is not None and so.spec.controls.keda == KedaScaling(cooldown=300, polling_interval=30)
    assert (so.cooldown, so.polling_interval, so.pause) == (300, 30, None)
    # the query backtest replays: an empty result is 0 (ignoreNullValues defaults to true)
    assert so.queries == {"s0-prometheus": '(sum(rate(http_requests_total{deployment="my-deployment"}[2m]))) '
                                            "or vector(0)"}


def test_every_field_of_the_specification_page() -> None:
    """keda.sh/docs "ScaledObject specification": the fields promscaler reads, set."""
    doc = _with(pollingInterval=15, cooldownPeriod=120, minReplicaCount=2, maxReplicaCount=20,
                fallback={"failureThreshold": 3, "replicas": 6},
                advanced={"restoreToOriginalReplicaCount": True, "horizontalPodAutoscalerConfig": {
                    "name": "custom-hpa-name",
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300,
                                               "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}}})
    doc["spec"]["scaleTargetRef"] = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db",
                                     "envSourceContainerName": "app"}
    doc["spec"]["triggers"][0]["metricType"] = "Value"
    doc["spec"]["triggers"][0]["metadata"]["ignoreNullValues"] = "false"
    doc["spec"]["fallback"] = None
    so = read_scaled_object(doc)
    assert so.hpa["metadata"]["name"] == "custom-hpa-name"
    spec = so.hpa["spec"]
    assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 20)
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"}
    assert spec["metrics"][0]["external"]["target"] == {"type": "Value", "value": "100500m"}
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300
    # minReplicaCount 2: no scale to zero, so activation plays no part (as in KEDA)
    assert so.spec.min_replicas == 2 and so.spec.controls is None
    assert so.spec.behavior is not None and so.spec.behavior.scale_down.stabilization_window_seconds == 300
    assert (so.polling_interval, so.cooldown) == (15, 120)
    assert so.queries["s0-prometheus"] == 'sum(rate(http_requests_total{deployment="my-deployment"}[2m]))'


def test_polling_and_cooldown_are_kedas_scaling() -> None:
    so = read_scaled_object(_with(pollingInterval=15, cooldownPeriod=120))
    assert so.spec.controls is not None and so.spec.controls.keda == KedaScaling(cooldown=120, polling_interval=15)


def test_fallback_and_pause_are_promscalers_controls() -> None:
    doc = _with(fallback={"failureThreshold": 3, "replicas": 6, "behavior": "currentReplicasIfHigher"})
    doc["metadata"]["annotations"] = {"autoscaling.keda.sh/paused-replicas": "2", "autoscaling.keda.sh/paused": "true"}
    so = read_scaled_object(doc)
    assert so.spec.controls is not None and so.spec.controls.fallback is not None
    fb = so.spec.controls.fallback
    assert (fb.failure_threshold, fb.replicas, fb.behavior) == (3, 6, "currentReplicasIfHigher")
    assert so.pause == Pause(2)   # paused-replicas wins over paused
    doc["metadata"]["annotations"] = {"autoscaling.keda.sh/paused": "true"}
    assert read_scaled_object(doc).pause == Pause()


def test_several_triggers_are_named_by_index_and_sorted_by_type() -> None:
    """keda.sh/docs "CPU" and "Memory" scalers: Resource metrics (ContainerResource with
    containerName); a metric's name keeps its trigger's index; hpa.go sorts the metrics by type."""
    doc = copy.deepcopy(PROMETHEUS)
    doc["spec"]["triggers"] = [
        {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}},
        {"type": "memory", "metricType": "AverageValue", "metadata": {"value": "512Mi", "containerName": "app"}},
        copy.deepcopy(PROMETHEUS["spec"]["triggers"][0]),
    ]
    so = read_scaled_object(doc)
    assert so.hpa["spec"]["metrics"] == [
        {"type": "ContainerResource", "containerResource": {
            "name": "memory", "container": "app", "target": {"type": "AverageValue", "averageValue": "512Mi"}}},
        {"type": "External", "external": {
            "metric": {"name": "s2-prometheus",
                       "selector": {"matchLabels": {"scaledobject.keda.sh/name": "prometheus-scaledobject"}}},
            "target": {"type": "AverageValue", "averageValue": "100500m"}}},
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
    ]
    assert so.triggers == (1, 2, 0)
    # cpu/memory triggers are always active: KEDA never scales this one to zero
    assert so.spec.min_replicas == 1 and so.spec.controls is None


REFUSED = {
    "another scaler": (lambda d: d["spec"]["triggers"][0].update(type="kafka"),
                       "spec.triggers[0].type: kafka is not supported (prometheus, cpu, memory)"),
    "a Thanos namespace": (lambda d: d["spec"]["triggers"][0]["metadata"].update(namespace="tenant"),
                           "spec.triggers[0].metadata.namespace: is not supported (a Thanos tenant"),
    "a typo in the metadata": (lambda d: d["spec"]["triggers"][0]["metadata"].update(treshold="1"),
                               "spec.triggers[0].metadata.treshold: is not supported (known: "),
    "Utilization for an External metric": (lambda d: d["spec"]["triggers"][0].update(metricType="Utilization"),
                                           "spec.triggers[0].metricType: must be AverageValue or Value (Utilization"),
    "no threshold": (lambda d: d["spec"]["triggers"][0]["metadata"].pop("threshold"),
                     "spec.triggers[0].metadata.threshold: required"),
    "a threshold that is no number": (lambda d: d["spec"]["triggers"][0]["metadata"].update(threshold="lots"),
                                      "spec.triggers[0].metadata.threshold: must be a number, got 'lots'"),
    # KEDA's validation (apis/keda/v1alpha1): idle below min; formula and target both given, target
    # a number above 0, metricType AverageValue or Value, the formula over named triggers
    "an idle count not below min": (lambda d: d["spec"].update(idleReplicaCount=1, minReplicaCount=1),
                                    "spec.idleReplicaCount: must be less than minReplicaCount (1)"),
    "an idle count other than 0": (lambda d: d["spec"].update(idleReplicaCount=1, minReplicaCount=3),
                                   "spec.idleReplicaCount: is supported only as 0, the only value KEDA supports"),
    "a negative initial cooldown": (lambda d: d["spec"].update(initialCooldownPeriod=-1),
                                    "spec.initialCooldownPeriod: must be greater than or equal to 0"),
    "a creation time that is no time": (lambda d: d["metadata"].update(creationTimestamp="yesterday"),
                                        "metadata.creationTimestamp: must be an RFC 3339 time"),
    "a formula without target": (lambda d: d["spec"].update(advanced={"scalingModifiers": {"formula": "a + b"}}),
                                 "spec.advanced.scalingModifiers.target: required when formula is given"),
    "a target without formula": (lambda d: d["spec"].update(advanced={"scalingModifiers": {"target": "2"}}),
                                 "spec.advanced.scalingModifiers.formula: required"),
    "a target of 0": (lambda d: d["spec"].update(advanced={"scalingModifiers": {"formula": "1", "target": "0"}}),
                      "spec.advanced.scalingModifiers.target: must be greater than 0"),
    "a Utilization composite": (lambda d: d["spec"].update(advanced={"scalingModifiers": {
        "formula": "1", "target": "2", "metricType": "Utilization"}}),
        "spec.advanced.scalingModifiers.metricType: must be AverageValue or Value (Utilization is not supported"),
    "an unnamed trigger in the formula": (
        lambda d: d["spec"].update(advanced={"scalingModifiers": {"formula": "s0 * 2", "target": "2"}}),
        "spec.advanced.scalingModifiers.formula: unknown name s0"),
    "a formula typo": (lambda d: d["spec"].update(advanced={"scalingModifiers": {"formul": "1", "target": "2"}}),
                       "spec.advanced.scalingModifiers.formul: is not supported (known: activationTarget, formula"),
    "cached metrics": (lambda d: d["spec"]["triggers"][0].update(useCachedMetrics=True),
                       "spec.triggers[0].useCachedMetrics: is not supported"),
    "max below min": (lambda d: d["spec"].update(minReplicaCount=5, maxReplicaCount=2),
                      "spec.maxReplicaCount: must be greater than or equal to minReplicaCount"),
    "a fallback with a Value trigger": (
        lambda d: (d["spec"].update(fallback={"failureThreshold": 3, "replicas": 2}),
                   d["spec"]["triggers"][0].update(metricType="Value")),
        "spec.fallback: KEDA supports a fallback only when every trigger is AverageValue"),
    "a fallback after 0 failures": (lambda d: d["spec"].update(fallback={"failureThreshold": 0, "replicas": 2}),
                                    "spec.fallback.failureThreshold: must be greater than or equal to 1"),
    "a bad behavior": (lambda d: d["spec"].update(advanced={"horizontalPodAutoscalerConfig": {
        "behavior": {"scaleUp": {"selectPolicy": "Often"}}}}),
        "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.selectPolicy: must be Max, Min or Disabled"),
    "a bad pause": (lambda d: d["metadata"].update(annotations={"autoscaling.keda.sh/paused-replicas": "-1"}),
                    "metadata.annotations[autoscaling.keda.sh/paused-replicas]: must be a replica count"),
    "another keda annotation": (
        lambda d: d["metadata"].update(annotations={"autoscaling.keda.sh/paused-scale-in": "true"}),
        "metadata.annotations[autoscaling.keda.sh/paused-scale-in]: is not supported"),
    "a cpu trigger without a type": (
        lambda d: d["spec"]["triggers"].append({"type": "cpu", "metadata": {"value": "50"}}),
        "spec.triggers[1].metricType: required"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_refused_by_field(case: str) -> None:
    change, message = REFUSED[case]
    doc = copy.deepcopy(PROMETHEUS)
    change(doc)
    with pytest.raises(SpecError) as info:
        read_scaled_object(doc)
    assert str(info.value).startswith(message), str(info.value)


def test_connection_fields_are_left_to_the_prometheus_url() -> None:
    """serverAddress, authenticationRef and the like say how to reach Prometheus, which backtest
    is told by --prometheus-url: accepted, and the query is the same."""
    doc = copy.deepcopy(PROMETHEUS)
    doc["spec"]["triggers"][0]["authenticationRef"] = {"name": "keda-prom-creds"}
    doc["spec"]["triggers"][0]["metadata"].update(authModes="bearer", unsafeSsl="true", timeout="1000")
    assert read_scaled_object(doc).queries == read_scaled_object(PROMETHEUS).queries


def test_a_tuned_autoscaler_is_written_back_as_a_scaled_object() -> None:
    so = read_scaled_object(PROMETHEUS)
    tuned = copy.deepcopy(so.autoscaler)
    tuned["spec"]["metrics"][0]["external"]["target"]["averageValue"] = "80"
    tuned["spec"]["behavior"] = {"scaleDown": {"stabilizationWindowSeconds": 60}}
    out = write_scaled_object(PROMETHEUS, tuned)
    assert out["apiVersion"] == "keda.sh/v1alpha1" and out["kind"] == "ScaledObject"
    given = PROMETHEUS["spec"]["triggers"][0]["metadata"]
    assert out["spec"]["triggers"][0]["metadata"] == {**given, "threshold": "80"}
    assert out["spec"]["advanced"] == {"horizontalPodAutoscalerConfig": {
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}
    assert read_scaled_object(out).hpa["spec"]["metrics"][0]["external"]["target"]["averageValue"] == "80"


def test_a_tune_candidate_is_read_once(tmp_path, monkeypatch) -> None:
    """tune parses each candidate: the ScaledObject written for it is read (KEDA's field names in
    errors); the given one's trigger order is kept from loading, not read again per candidate."""
    doc = _with(triggers=[{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}},
                          *PROMETHEUS["spec"]["triggers"]])
    path = tmp_path / "so.yaml"
    path.write_text(yaml.safe_dump(doc))
    (spec,) = specs.load_specs(str(path))
    tuned = copy.deepcopy(spec.raw)
    tuned["spec"]["metrics"][0]["external"]["target"]["averageValue"] = "80"  # External sorts first: trigger 1
    reads: list[Any] = []

    def counted(d: Any) -> Any:
        reads.append(d)
        return read_scaled_object(d)

    monkeypatch.setattr(specs, "read_scaled_object", counted)
    monkeypatch.setattr(keda, "read_scaled_object", counted)
    parsed = spec.parse(tuned)
    assert len(reads) == 1
    assert reads[0]["spec"]["triggers"][1]["metadata"]["threshold"] == "80"
    assert reads[0]["spec"]["triggers"][0] == doc["spec"]["triggers"][0]
    assert parsed.metrics[0].target.average_value_milli == 80_000


def _composite(**modifiers: Any) -> dict[str, Any]:
    """KEDA's docs' "compose average value" example, with two prometheus triggers named as there."""
    doc = copy.deepcopy(PROMETHEUS)
    trigger = PROMETHEUS["spec"]["triggers"][0]
    doc["spec"]["triggers"] = [{**copy.deepcopy(trigger), "name": "trig_one"},
                               {**copy.deepcopy(trigger), "name": "trig_two"}]
    doc["spec"]["advanced"] = {"scalingModifiers": {"formula": "(trig_one + trig_two)/2", "target": "2",
                                                    "activationTarget": "2", "metricType": "AverageValue",
                                                    **modifiers}}
    return doc


def test_scaling_modifiers_give_the_hpa_one_composite_metric() -> None:
    """hpa.go: with scalingModifiers the HPA has the External metric `composite-metric`, selected
    by the ScaledObject's name, with `target` in milli-units, instead of the triggers' metrics."""
    so = read_scaled_object(_composite())
    assert so.hpa["spec"]["metrics"] == [{"type": "External", "external": {
        "metric": {"name": "composite-metric",
                   "selector": {"matchLabels": {"scaledobject.keda.sh/name": "prometheus-scaledobject"}}},
        "target": {"type": "AverageValue", "averageValue": "2"}}}]
    # the triggers are still what is read (backtest replays both queries); the composite decides
    assert [m.name for m in so.spec.metrics] == ["s0-prometheus", "s1-prometheus"]
    assert set(so.queries) == {"s0-prometheus", "s1-prometheus"}
    composite = so.spec.controls.composite if so.spec.controls else None
    assert composite is not None and composite.inputs == (("trig_one", 0), ("trig_two", 1))
    (metric,) = composite.metrics
    assert (metric.name, metric.target.average_value_milli, metric.activation_milli) == ("composite-metric", 2000, 2000)
    value = read_scaled_object(_composite(metricType="Value", target="0.5")).hpa["spec"]["metrics"][0]
    assert value["external"]["target"] == {"type": "Value", "value": "500m"}


def test_scaling_modifiers_keep_the_resource_metrics() -> None:
    """hpa.go keeps the specs with a Resource source beside the composite metric (a cpu trigger is
    no formula input: KEDA's validation leaves cpu/memory out of the formula's names)."""
    doc = _composite(formula="trig_one * 2")
    doc["spec"]["minReplicaCount"] = 1
    doc["spec"]["triggers"].append({"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}})
    so = read_scaled_object(doc)
    assert [m["type"] for m in so.hpa["spec"]["metrics"]] == ["Resource", "External"]
    assert so.hpa["spec"]["metrics"][1]["external"]["metric"]["name"] == "composite-metric"
    doc["spec"]["triggers"][2]["name"] = "trig_three"
    doc["spec"]["advanced"]["scalingModifiers"]["formula"] = "trig_three"
    with pytest.raises(SpecError, match="unknown name trig_three"):
        read_scaled_object(doc)


def test_a_tuned_composite_target_is_written_as_scaling_modifiers_target() -> None:
    """tune edits the autoscaler's first metric's target (and every one alike): with
    scalingModifiers that is the composite target, written back to scalingModifiers.target."""
    doc = _composite()
    so = read_scaled_object(doc)
    assert [m["external"]["target"] for m in so.autoscaler["spec"]["metrics"]] == \
        [{"type": "AverageValue", "averageValue": "2"}] * 2
    tuned = copy.deepcopy(so.autoscaler)
    for m in tuned["spec"]["metrics"]:
        m["external"]["target"]["averageValue"] = "1500m"
    out = write_scaled_object(doc, tuned)
    assert out["spec"]["advanced"]["scalingModifiers"]["target"] == "1.5"
    assert out["spec"]["triggers"] == doc["spec"]["triggers"]   # the thresholds play no part: as given
    assert read_scaled_object(out).hpa["spec"]["metrics"][0]["external"]["target"]["averageValue"] == "1500m"


def test_idle_replica_count_and_initial_cooldown_are_kedas_scaling() -> None:
    """idleReplicaCount 0 below minReplicaCount 3: KEDA scales to zero itself and from zero to 3,
    its HPA has minReplicas 3; initialCooldownPeriod counts from metadata.creationTimestamp."""
    doc = _with(idleReplicaCount=0, minReplicaCount=3, initialCooldownPeriod=120)
    doc["metadata"]["creationTimestamp"] = "2026-03-02T09:00:00Z"
    so = read_scaled_object(doc)
    assert so.hpa["spec"]["minReplicas"] == 3
    assert so.spec.min_replicas == 0 and so.spec.metrics[0].activation_milli == 5500
    keda_scaling = so.spec.controls.keda if so.spec.controls else None
    assert keda_scaling is not None
    assert (keda_scaling.floor, keda_scaling.initial_cooldown) == (3, 120)
    assert keda_scaling.created is not None and keda_scaling.created.isoformat() == "2026-03-02T09:00:00+00:00"
