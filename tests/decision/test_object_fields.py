"""autoscaler.objects reads its fields through decision/fields.py: the same one-line `path: reason`,
raised as ObjectError (a SpecError) with the path relative to the object."""

from __future__ import annotations

import pytest

from autoscaler.decision.fields import SpecError
from autoscaler.objects import ObjectError, external_metric_reading, pod_info, pods_metric_reading

RPS_ITEM = {"describedObject": {"kind": "Pod", "name": "web-1"}, "metricName": "rps", "value": "5"}


@pytest.mark.parametrize(("read", "message"), [
    (lambda: pod_info({"metadata": {"name": "web-1"}, "spec": {"containers": {"name": "app"}}}),
     "spec.containers: must be a list"),
    (lambda: pod_info({"metadata": "web-1"}), "metadata: must be an object"),
    (lambda: pod_info({"metadata": {"name": "web-1"},
                       "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "lots"}}}]}}),
     "spec.containers[0].resources.requests.cpu: not a quantity: 'lots'"),
    (lambda: pods_metric_reading([{**RPS_ITEM, "window": "soon"}], "rps"), "[0].window: not a duration: 'soon'"),
    (lambda: pods_metric_reading([{**RPS_ITEM, "window": -5}], "rps"), "[0].window: not a duration: -5"),
    (lambda: external_metric_reading([{"metricName": "q", "value": None}]), "[0].value: required"),
])
def test_a_bad_field_of_an_api_object_is_one_line_naming_it(read, message) -> None:
    with pytest.raises(ObjectError) as caught:
        read()
    assert str(caught.value) == message
    assert isinstance(caught.value, SpecError) and "\n" not in str(caught.value)
