"""The HorizontalAutoscaler CRD at admission, as a kube-apiserver applies it: its CEL rules and
schema bounds refuse what the native HPA's validation refuses (pkg/apis/autoscaling/validation),
its defaults give the spec an HPA gets (pkg/apis/autoscaling/v2/defaults.go), and `kubectl get`
prints the HPA's columns. Rules run on a real CEL evaluator (common-expression-language) inside
kubesim's admission, reached through the official kubernetes client and kubectl."""

from __future__ import annotations

import copy
import json
import re
from datetime import datetime
from typing import Any

import cel
import pytest
import yaml
from cronsim import CronSim, CronSimError
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st
from kubernetes import client

from ..support import kubectl_ok, run_kubectl
from .conftest import NS, ROOT, autoscaler, deployment, eventually, external_metric, pods_metric, running, settings

CRD = yaml.safe_load((ROOT / "apiservice/horizontalautoscaler-crd.yaml").read_text())


def _rules(node: Any) -> list[str]:
    out: list[str] = []
    if isinstance(node, dict):
        out += [r["rule"] for r in node.get("x-kubernetes-validations") or ()]
        for v in node.values():
            out += _rules(v)
    elif isinstance(node, list):
        for v in node:
            out += _rules(v)
    return out


def test_every_rule_compiles() -> None:
    rules = set(_rules(CRD))
    assert len(rules) >= 10
    for rule in rules:
        cel.compile(rule)


@pytest.fixture
def api(sim):
    with client.ApiClient(sim.client_configuration()) as c:
        yield client.CustomObjectsApi(c)


def _create(api, obj: dict[str, Any]) -> dict[str, Any]:
    return api.create_namespaced_custom_object("promscaler.io", "v1alpha1", NS, "horizontalautoscalers", obj)


def _refused(api, obj: dict[str, Any]) -> str:
    with pytest.raises(client.ApiException) as info:
        _create(api, obj)
    assert info.value.status == 422, info.value.body
    assert info.value.body is not None
    body = json.loads(info.value.body)
    assert body["kind"] == "Status" and body["reason"] == "Invalid"
    return body["message"]


PODS = pods_metric("http_requests", "500m")
EXTERNAL = external_metric("queue_messages_ready", "30")


def _with(spec_change: dict[str, Any], metrics: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    obj = autoscaler("web", "web", metrics if metrics is not None else [copy.deepcopy(PODS)])
    obj["spec"].update(spec_change)
    return obj


REFUSED = {
    # minReplicas 0 is the scale-to-zero case only, which needs an Object or External metric
    "minReplicas 0 with a Pods metric": (_with({"minReplicas": 0}), "spec.minReplicas", "greater than or equal to 1"),
    "maxReplicas below minReplicas": (_with({"minReplicas": 5, "maxReplicas": 2}), "spec",
                                      "maxReplicas must be greater than or equal to minReplicas"),
    "maxReplicas 0": (_with({"maxReplicas": 0}), "spec.maxReplicas", "greater than or equal to 1"),
    "Pods metric carrying an external block": (
        _with({}, [{**PODS, "external": EXTERNAL["external"]}]), "spec.metrics[0]",
        "must populate the given metric source only"),
    "External type without its block": (
        _with({}, [{"type": "External", "pods": PODS["pods"]}]), "spec.metrics[0]",
        "must populate information for the given metric source"),
    "External metric with a Utilization target": (
        _with({}, [{"type": "External", "external": {"metric": {"name": "q"},
                                                     "target": {"type": "Utilization", "averageUtilization": 50}}}]),
        "spec.metrics[0].external.target.type", "must be either Value or AverageValue"),
    "Pods metric with a Value target": (
        _with({}, [{"type": "Pods", "pods": {"metric": {"name": "r"}, "target": {"type": "Value", "value": "1"}}}]),
        "spec.metrics[0].pods.target.type", "must be AverageValue"),
    "Utilization target without averageUtilization": (
        _with({}, [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}]),
        "spec.metrics[0].resource.target", "averageUtilization must be set"),
    "behavior with no policy": (
        _with({"behavior": {"scaleDown": {"policies": []}}}), "spec.behavior.scaleDown.policies", "at least 1 items"),
    "unknown select policy": (
        _with({"behavior": {"scaleUp": {"selectPolicy": "Sometimes"}}}), "spec.behavior.scaleUp.selectPolicy",
        "Unsupported value"),
    # the opt-in controls (docs/controls.md)
    "fallback after 0 failures": (
        _with({"fallback": {"failureThreshold": 0, "replicas": 3}}), "spec.fallback.failureThreshold",
        "greater than or equal to 1"),
    "fallback without replicas": (_with({"fallback": {"failureThreshold": 3}}), "spec.fallback.replicas",
                                  "Required value"),
    "unknown fallback behavior": (
        _with({"fallback": {"failureThreshold": 3, "replicas": 3, "behavior": "often"}}), "spec.fallback.behavior",
        "Unsupported value"),
    "schedule with end and duration": (
        _with({"schedules": [{"name": "a", "start": "0 8 * * *", "end": "0 9 * * *", "duration": "1h",
                              "minReplicas": 2}]}), "spec.schedules[0]", "exactly one must be set"),
    "schedule with neither end nor duration": (
        _with({"schedules": [{"name": "a", "start": "0 8 * * *", "minReplicas": 2}]}), "spec.schedules[0]",
        "schedules[].end or schedules[].duration"),
    "schedule with a three-field cron": (
        _with({"schedules": [{"name": "a", "start": "0 8 *", "duration": "1h", "minReplicas": 2}]}),
        "spec.schedules[0].start", "should match"),
    # cron fields out of range and unknown zones: accepted before, then InvalidSpec at the next sync
    "schedule starting at hour 24": (
        _with({"schedules": [{"name": "a", "start": "0 24 * * *", "duration": "1h", "minReplicas": 2}]}),
        "spec.schedules[0].start", "must be a cron expression: minute (0-59) hour (0-23)"),
    "schedule ending on day-of-week 8": (
        _with({"schedules": [{"name": "a", "start": "0 8 * * 1", "end": "0 18 * * 8", "minReplicas": 2}]}),
        "spec.schedules[0].end", "must be a cron expression"),
    "schedule in a misspelt time zone": (
        _with({"schedules": [{"name": "a", "start": "0 8 * * *", "duration": "1h", "timeZone": "Europe/Berln",
                              "minReplicas": 2}]}),
        "spec.schedules[0].timeZone",
        "unknown time zone Europe/Berln evaluating rule: must be an IANA time zone name"),
    "schedule floor above maxReplicas": (
        _with({"schedules": [{"name": "a", "start": "0 8 * * *", "duration": "1h", "minReplicas": 99}]}),
        "spec.schedules", "schedules[].minReplicas must be less than or equal to maxReplicas"),
    "activation on a Pods metric": (
        _with({"minReplicas": 0}, [copy.deepcopy(EXTERNAL), {**copy.deepcopy(PODS), "activationThreshold": "5"}]),
        "spec.metrics[1].activationThreshold", "allowed only on an Object or External metric"),
    "activation without minReplicas 0": (
        _with({}, [{**copy.deepcopy(EXTERNAL), "activationThreshold": "5"}]), "spec.metrics",
        "metrics[].activationThreshold needs minReplicas 0"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_refused_at_admission_with_the_field(api, case: str) -> None:
    obj, field, why = REFUSED[case]
    message = _refused(api, obj)
    assert message.startswith('HorizontalAutoscaler.promscaler.io "web" is invalid: '), message
    assert f"{field}: " in message and why in message, message


def test_every_control_is_accepted(api) -> None:
    obj = _with({"minReplicas": 0, "fallback": {"failureThreshold": 3, "replicas": 4},
                 "schedules": [{"name": "office", "start": "0 8 * * 1-5", "end": "0 18 * * 1-5",
                                "timeZone": "Europe/Berlin", "minReplicas": 5}]},
                [{**copy.deepcopy(EXTERNAL), "activationThreshold": "5"}])
    spec = _create(api, obj)["spec"]
    assert spec["fallback"] == {"failureThreshold": 3, "replicas": 4, "behavior": "static"}  # defaulted
    assert spec["schedules"][0]["timeZone"] == "Europe/Berlin"
    assert spec["metrics"][0]["activationThreshold"] == "5"


@pytest.mark.parametrize(("start", "zone"), [
    ("0 8 * * 1-5", "UTC"), ("*/15 6-22 * * MON-FRI", "America/New_York"), ("30 0 8 L * *", "Asia/Kolkata"),
    ("0 9 * jan,dec 5L", "Australia/Lord_Howe"), ("0 0 LW * *", "Etc/GMT+5"), ("59 23 31 12 SUN#2", "Europe/Berlin"),
])
def test_valid_schedules_are_accepted(api, start: str, zone: str) -> None:
    obj = _with({"schedules": [{"name": "a", "start": start, "duration": "1h", "timeZone": zone, "minReplicas": 2}]})
    assert _create(api, obj)["spec"]["schedules"][0]["start"] == start


_SCHEDULE = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["schedules"]
_CRON_RULE = _rules(_SCHEDULE["items"]["properties"]["start"])[0]
_FIELDS = st.sampled_from(["*", "0", "7", "23", "24", "31", "32", "59", "60", "1-5", "5-1", "*/15", "*/0", "2/3",
                           "JAN", "sun", "L", "LW", "5L", "MON#2", "1#6", "1,2", "x", "07", ""])


@examples(max_examples=400, deadline=None)
@given(st.lists(_FIELDS, min_size=5, max_size=6))
def test_the_cron_rule_agrees_with_what_the_controller_reads(parts: list[str]) -> None:
    """The CEL rule accepts exactly the expressions cronsim (schedules.py) reads, but for the two
    things a regular expression cannot see, left to the controller (docs/controls.md)."""
    expr = " ".join(parts)
    # A range written backwards (5-1): cronsim refuses it, the rule cannot see it; so cronsim is asked
    # about the same expression with the range the right way round.
    try:
        CronSim(expr.replace("5-1", "1-5"), datetime(2026, 1, 1))
        reads = True
    except CronSimError:
        reads = False
    assert cel.compile(_CRON_RULE).execute({"self": expr}) is reads, expr


def test_scale_to_zero_with_an_external_metric_is_accepted(api) -> None:
    created = _create(api, _with({"minReplicas": 0}, [copy.deepcopy(EXTERNAL)]))
    assert created["spec"]["minReplicas"] == 0


def test_defaults_are_the_hpas(api) -> None:
    """Kubernetes' v2 defaulting: minReplicas 1; CPU at 80% when no metric; with `behavior`, scale-up
    0 s / Max / {4 Pods, 100 Percent per 15 s}, scale-down Max / {100 Percent per 15 s} and no
    stabilization window of its own (the controller's flag then applies)."""
    obj = autoscaler("bare", "web", [])
    del obj["spec"]["metrics"], obj["spec"]["minReplicas"]
    obj["spec"]["behavior"] = {"scaleDown": {"stabilizationWindowSeconds": 60}}
    spec = _create(api, obj)["spec"]
    assert spec["minReplicas"] == 1
    assert spec["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    assert spec["behavior"]["scaleUp"] == {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]}
    assert spec["behavior"]["scaleDown"] == {"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
                                             "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}
    no_behavior = _create(api, autoscaler("plain", "web", [copy.deepcopy(PODS)]))["spec"]
    assert "behavior" not in no_behavior  # as for an HPA: behavior stays unset unless given


def test_refused_update_leaves_the_object(api, sim) -> None:
    _create(api, _with({}))
    obj = api.get_namespaced_custom_object("promscaler.io", "v1alpha1", NS, "horizontalautoscalers", "web")
    obj["spec"]["minReplicas"] = 0
    with pytest.raises(client.ApiException) as info:
        api.replace_namespaced_custom_object("promscaler.io", "v1alpha1", NS, "horizontalautoscalers", "web", obj)
    assert info.value.status == 422
    assert sim.get("promscaler.io/v1alpha1", "HorizontalAutoscaler", NS, "web")["spec"]["minReplicas"] == 1


# --- kubectl get ---------------------------------------------------------------------------------

def _kubectl(sim, *args: str) -> str:
    return kubectl_ok(sim.kubeconfig_path, *args)


async def test_kubectl_get_prints_the_hpa_columns(sim, fake) -> None:
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = lambda names: f"{-(-2332 // max(1, len(names)))}m"
    fake.external[(NS, "queue_messages_ready")] = [({}, "36")]
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m"),
                                        external_metric("queue_messages_ready", "30")], max_replicas=3))
    async with running(sim, settings()):
        await eventually(lambda: "targets" in (sim.get("promscaler.io/v1alpha1", "HorizontalAutoscaler", NS, "web")
                                                or {}).get("status", {})
                         and sim.get("apps/v1", "Deployment", NS, "web")["spec"]["replicas"] == 3)
        await eventually(lambda: "778m/500m" in _kubectl(sim, "-n", NS, "get", "horizontalautoscalers"))
    for resource in ("horizontalautoscalers", "has", "horizontalautoscaler.promscaler.io"):
        lines = _kubectl(sim, "-n", NS, "get", resource).splitlines()
        header = ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "CONTROL", "AGE"]
        assert re.split(r"\s{2,}", lines[0]) == header
        cells = re.split(r"\s{2,}", lines[1])
        # 2332m over 3 pods = 778m per pod against 500m; queue 36 over 3 replicas = 12 per replica against 30
        assert cells[:6] == ["web", "Deployment/web", "778m/500m, 12/30 (avg)", "1", "3", "3"], lines
        assert len(cells) == 7 and re.fullmatch(r"\d+s", cells[6])  # no control in force: CONTROL is empty
    raw = yaml.safe_load(_kubectl(sim, "-n", NS, "get", "has", "web", "-o", "yaml"))
    assert raw["status"]["currentMetrics"][0]["pods"]["current"]["averageValue"] == "778m"  # raw values unchanged


def test_kubectl_apply_names_the_bad_schedule_fields(sim, tmp_path) -> None:
    """The two schedules a kube-apiserver took before (and the controller refused at its next sync),
    refused by `kubectl apply`, each naming its field; the corrected object is applied."""
    for field, value, why in (("start", "0 24 * * *", "must be a cron expression"),
                              ("timeZone", "Europe/Berln", "unknown time zone Europe/Berln")):
        schedule = {"name": "office", "start": "0 8 * * 1-5", "duration": "10h", "minReplicas": 2, field: value}
        path = tmp_path / f"{field}.yaml"
        path.write_text(yaml.safe_dump(_with({"schedules": [schedule]})))
        done = run_kubectl(sim.kubeconfig_path, "apply", "-f", str(path))
        assert done.returncode == 1, done.stdout
        assert f"spec.schedules[0].{field}: Invalid value" in done.stderr and why in done.stderr, done.stderr
        assert sim.get("promscaler.io/v1alpha1", "HorizontalAutoscaler", NS, "web") is None
    path = tmp_path / "good.yaml"
    good = {"name": "office", "start": "0 8 * * 1-5", "duration": "10h", "minReplicas": 2, "timeZone": "Europe/Berlin"}
    path.write_text(yaml.safe_dump(_with({"schedules": [good]})))
    assert "created" in kubectl_ok(sim.kubeconfig_path, "apply", "-f", str(path))
