"""The CRD: generated from autoscaling/v2's schema, checked in unchanged, structural, and it
accepts a real HPA spec while rejecting invalid ones."""

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from autoscaler.controller.crd import build_crd, render, render_chart

from .conftest import autoscaler, pods_metric

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_manifests_match_the_generator():
    text = render()
    assert (ROOT / "apiservice/horizontalautoscaler-crd.yaml").read_text() == text
    chart = (ROOT / "charts/promscaler/templates/horizontalautoscaler-crd.yaml").read_text()
    assert chart == render_chart()
    assert text.split("\n", 1)[1] in chart


def _schema():
    crd = build_crd()
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    return version["schema"]["openAPIV3Schema"]


def _validate(obj):
    jsonschema.validate(obj, _schema())


HA: dict[str, Any] = {
    **autoscaler("web", "web", [pods_metric("http_requests", "500m")], behavior={
        "scaleDown": {
            "stabilizationWindowSeconds": 60,
            "policies": [{"type": "Percent", "value": 50, "periodSeconds": 15}],
        }
    }),
    "status": {
        "currentReplicas": 2,
        "desiredReplicas": 3,
        "conditions": [
            {
                "type": "AbleToScale",
                "status": "True",
                "reason": "SucceededRescale",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    },
}


def test_accepts_an_hpa_spec_and_status():
    _validate(HA)


@pytest.mark.parametrize("path,value", [
    (("spec", "maxReplicas"), 0),
    (("spec", "metrics", 0, "type"), "Bogus"),
    (("spec", "metrics", 0, "pods", "target", "type"), "Percent"),
    (("spec", "behavior", "scaleDown", "policies", 0, "periodSeconds"), 1801),
    (("spec", "metrics", 0, "pods", "target", "averageValue"), "five"),
])
def test_rejects_invalid_fields(path, value):
    import copy

    obj = copy.deepcopy(HA)
    node = obj
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        _validate(obj)


def test_required_fields():
    import copy

    obj = copy.deepcopy(HA)
    del obj["spec"]["scaleTargetRef"]
    with pytest.raises(jsonschema.ValidationError):
        _validate(obj)


def test_conditions_carry_their_observed_generation():
    # autoscaling/v2 of Kubernetes 1.37 (kubernetes#138653): a field the API server keeps, not one it prunes
    schema = _schema()["properties"]["status"]["properties"]
    assert schema["conditions"]["items"]["properties"]["observedGeneration"]["type"] == "integer"
    assert schema["observedGeneration"]["type"] == "integer"
    import copy

    obj = copy.deepcopy(HA)
    obj["status"]["observedGeneration"] = 2
    obj["status"]["conditions"][0]["observedGeneration"] = 2
    _validate(obj)
    obj["status"]["conditions"][0]["observedGeneration"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        _validate(obj)
