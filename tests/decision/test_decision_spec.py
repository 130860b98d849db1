"""parse_spec: API-server defaulting and validation, with field paths."""

from __future__ import annotations

import pytest

from autoscaler.decision.spec import HPASpec, SpecError, parse_spec
from promscaler.selectors import from_label_selector

REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def base(**kw) -> dict:
    d = {"scaleTargetRef": REF, "maxReplicas": 10}
    d.update(kw)
    return d


def test_defaults_like_the_api_server() -> None:
    s = parse_spec(base())
    assert isinstance(s, HPASpec)
    assert s.min_replicas == 1                      # minReplicas defaults to 1
    assert len(s.metrics) == 1                      # no metrics: CPU at 80% utilization
    m = s.metrics[0]
    assert (m.type, m.name, m.target.type, m.target.average_utilization) == ("Resource", "cpu", "Utilization", 80)
    assert s.behavior is None                       # no behavior: the legacy path


def test_behavior_defaults_filled() -> None:
    s = parse_spec(base(behavior={}))
    up, down = s.behavior.scale_up, s.behavior.scale_down
    assert up.stabilization_window_seconds == 0 and up.select_policy == "Max"
    assert {(p.type, p.value, p.period_seconds) for p in up.policies} == {("Pods", 4, 15), ("Percent", 100, 15)}
    assert down.stabilization_window_seconds is None  # filled from the controller flag at decision time
    assert [(p.type, p.value, p.period_seconds) for p in down.policies] == [("Percent", 100, 15)]
    assert up.tolerance is None and down.tolerance is None


def test_behavior_partial_override_keeps_other_defaults() -> None:
    s = parse_spec(base(behavior={"scaleDown": {"selectPolicy": "Min", "tolerance": "0.05"}}))
    down = s.behavior.scale_down
    assert down.select_policy == "Min" and down.tolerance == 0.05
    assert [(p.type, p.value) for p in down.policies] == [("Percent", 100)]


def test_all_metric_types_parse() -> None:
    s = parse_spec(base(minReplicas=0, metrics=[
        {"type": "Resource",
         "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "512Mi"}}},
        {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "app",
                                                            "target": {"type": "Utilization",
                                                                       "averageUtilization": 60}}},
        {"type": "Pods", "pods": {"metric": {"name": "qps", "selector": {"matchLabels": {"verb": "GET"}}},
                                  "target": {"type": "AverageValue", "averageValue": "1.5k"}}},
        {"type": "Object", "object": {"describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                                                          "name": "main"},
                                      "metric": {"name": "hits"}, "target": {"type": "Value", "value": "2k"}}},
        {"type": "External", "external": {"metric": {"name": "queue", "selector": {"matchExpressions": [
            {"key": "q", "operator": "In", "values": ["a", "b"]}]}},
                                          "target": {"type": "AverageValue", "averageValue": 30}}},
    ]))
    mem, cont, pods, obj, ext = s.metrics
    assert mem.target.average_value_milli == 512 * 2**20 * 1000
    assert cont.container == "app" and cont.target.average_utilization == 60
    assert pods.target.average_value_milli == 1_500_000
    assert pods.selector == from_label_selector({"matchLabels": {"verb": "GET"}})
    assert obj.described_object.kind == "Ingress" and obj.target.value_milli == 2_000_000
    assert ext.target.average_value_milli == 30_000 and s.min_replicas == 0 and s.has_object_or_external


@pytest.mark.parametrize(("spec", "path"), [
    ({"maxReplicas": 3}, "hpa.spec.scaleTargetRef: required"),
    (base(scaleTargetRef={"kind": "Deployment"}), "hpa.spec.scaleTargetRef.name: required"),
    ({"scaleTargetRef": REF}, "hpa.spec.maxReplicas: required"),
    (base(maxReplicas=0), "hpa.spec.maxReplicas: must be greater than or equal to 1"),
    (base(minReplicas="2"), "hpa.spec.minReplicas: must be an integer"),
    (base(metrics=[{"type": "Custom"}]),
     "hpa.spec.metrics[0].type: must be Resource, ContainerResource, Pods, Object or External, got 'Custom'"),
    (base(metrics=[{"type": "Pods",
                    "pods": {"metric": {"name": "x"}, "target": {"type": "AverageValue", "averageValue": "1"}},
                    "external": {}}]), "hpa.spec.metrics[0].external: must not be set"),
    (base(metrics=[{"type": "Pods"}]), "hpa.spec.metrics[0].pods: required"),
    (base(metrics=[{"type": "Pods", "pods": {"target": {"type": "AverageValue", "averageValue": "1"}}}]),
     "hpa.spec.metrics[0].pods.metric: required"),
    (base(metrics=[{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Value", "value": "1"}}}]),
     "hpa.spec.metrics[0].resource.target.type: must be Utilization or AverageValue"),
    (base(metrics=[{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}]),
     "hpa.spec.metrics[0].resource.target.averageUtilization: required"),
    (base(metrics=[{"type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}}]),
     "hpa.spec.metrics[0].resource.target.averageUtilization: must be greater than or equal to 1"),
    (base(metrics=[{"type": "External",
                    "external": {"metric": {"name": "q"}, "target": {"type": "Value", "value": "0"}}}]),
     "hpa.spec.metrics[0].external.target.value: must be positive"),
    (base(metrics=[{"type": "External", "external": {"metric": {"name": "q", "selector": {"matchLabels": {"a": "b c"}}},
                                                     "target": {"type": "Value", "value": "1"}}}]),
     "hpa.spec.metrics[0].external.metric.selector: invalid label value"),
    (base(metrics=[{"type": "Object", "object": {"metric": {"name": "q"}, "target": {"type": "Value", "value": "1"}}}]),
     "hpa.spec.metrics[0].object.describedObject: required"),
    (base(metrics=[{"type": "ContainerResource", "containerResource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 50}}}]),
     "hpa.spec.metrics[0].containerResource.container: required"),
    (base(behavior={"scaleUp": {"policies": []}}),
     "hpa.spec.behavior.scaleUp.policies: must specify at least one Policy"),
    (base(behavior={"scaleUp": {"policies": [{"type": "Replicas", "value": 1, "periodSeconds": 1}]}}),
     "hpa.spec.behavior.scaleUp.policies[0].type: must be Pods or Percent"),
    (base(behavior={"scaleUp": {"policies": [{"type": "Pods", "value": 0, "periodSeconds": 1}]}}),
     "hpa.spec.behavior.scaleUp.policies[0].value: must be greater than or equal to 1"),
    (base(behavior={"scaleDown": {"stabilizationWindowSeconds": 3601}}),
     "hpa.spec.behavior.scaleDown.stabilizationWindowSeconds: must be less than or equal to 3600"),
    (base(behavior={"scaleDown": {"tolerance": "-0.1"}}),
     "hpa.spec.behavior.scaleDown.tolerance: must be greater than or equal to 0"),
    (base(behavior={"scaleDown": {"tolerance": "ten"}}), "hpa.spec.behavior.scaleDown.tolerance: not a quantity"),
])
def test_errors_carry_the_field_path(spec: dict, path: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(spec)
    assert path in str(err.value)


def test_custom_root_path() -> None:
    with pytest.raises(SpecError, match=r"^spec\.maxReplicas: required"):
        parse_spec({"scaleTargetRef": REF}, "spec")
