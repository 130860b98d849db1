"""Deciding as Kubernetes 1.36 or 1.37: every difference the decision encodes (docs/controls.md,
"Kubernetes 1.36 and 1.37"), each against its source: the release notes of v1.37.0 and the pull
requests they name, and Kubernetes' own validation and controller test cases.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoscaler.decision import ControllerConfig, SpecError, admit, decide, parse_spec
from autoscaler.decision.kubeversion import KubeVersion, features, supported_version
from autoscaler.decision.model import SelectorOverlap
from autoscaler.decision.overlap import overlap, selecting
from promscaler.selectors import parse_selector

from .decision_helpers import (
    cpu_util,
    ext_avg,
    ext_value,
    external,
    failure,
    inp,
    object_avg,
    object_value,
    pods,
    samples,
    spec,
)

V136 = ControllerConfig(kube_version=KubeVersion(1, 36))
V137 = ControllerConfig(kube_version=KubeVersion(1, 37))


def _conds(decision) -> dict[str, tuple[str, str, str]]:
    return {c.type: (c.status, c.reason, c.message) for c in decision.conditions}


def _zero_spec(activation: str | None = None, metric: dict | None = None):
    metric = metric or ext_value("1")
    if activation is not None:
        metric = {**metric, "activationThreshold": activation}
    return parse_spec({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "t"},
                       "minReplicas": 0, "maxReplicas": 10, "metrics": [metric]}, "spec")


# ---- HPAScaleToZero: alpha and off in 1.36, beta and on in 1.37 (#139648) -------------------------

def test_136_refuses_min_replicas_zero_as_its_api_server_does():
    # pkg/apis/autoscaling/validation: with the gate off, minReplicas 0 "must be greater than or
    # equal to 1" (TestValidateHorizontalPodAutoscalerScaleToZeroDisabled); with it on, valid.
    with pytest.raises(SpecError) as err:
        admit(_zero_spec(), "HorizontalPodAutoscaler", KubeVersion(1, 36))
    assert str(err.value).startswith("spec.minReplicas: must be greater than or equal to 1")
    admit(_zero_spec(), "HorizontalPodAutoscaler", KubeVersion(1, 37))


def test_136_admits_min_replicas_zero_in_a_horizontal_autoscaler():
    # promscaler's own scaling to zero needs no gate (docs/controls.md#kubernetes-136-and-137).
    admit(_zero_spec(), "HorizontalAutoscaler", KubeVersion(1, 36))


def test_136_at_zero_is_disabled_even_after_scaling_there():
    # Gate off: scaledToZeroCondition is false whatever the status says, so a target at zero is
    # ScalingDisabled (the condition a 1.37 controller left behind does not bring it back).
    at_zero = dict(spec_=_zero_spec(), current=0, readings=[external(2500)], scaled_to_zero=True)
    old = decide(inp(**at_zero, config=V136))
    assert old.desired_replicas == 0 and not old.scale
    assert _conds(old)["ScalingActive"][:2] == ("False", "ScalingDisabled")
    assert "ScaledToZero" not in _conds(old)
    # 1.37: scales up from zero to ceil(2500m / 1) = 3 (Value target: ceil(ratio) from zero).
    new = decide(inp(**at_zero, config=V137))
    assert new.desired_replicas == 3
    assert _conds(new)["ScaledToZero"][:2] == ("False", "NotScaledToZero")


def test_136_goes_to_zero_but_writes_no_scaled_to_zero_condition():
    # An HPA stored with minReplicas 0 (valid from before; the API server ratchets) under a gate-off
    # controller: minReplicas 0 still bounds the recommendation, so an empty queue takes it to 0, but
    # without ScaledToZero it can never come back (the KEP's advice: raise minReplicas before
    # turning the gate off).
    empty = dict(spec_=_zero_spec(metric=ext_avg("1")), current=3, readings=[external(0)])
    old = decide(inp(**empty, config=V136))
    assert old.desired_replicas == 0
    assert "ScaledToZero" not in _conds(old)
    assert _conds(old)["AbleToScale"][:2] == ("True", "SucceededRescale")
    new = decide(inp(**empty, config=V137))
    assert new.desired_replicas == 0
    assert _conds(new)["ScaledToZero"] == ("True", "ScaledToZero", "the HPA controller scaled the workload to zero")


def test_136_horizontal_autoscaler_scales_from_zero_as_on_137():
    # A HorizontalAutoscaler decides as 1.37's HPA here whatever the release: 3, as above.
    at_zero = inp(_zero_spec(), 0, (), [external(2500)], scaled_to_zero=True, config=V136)
    decision = decide(replace(at_zero, native=False))
    assert decision.desired_replicas == 3
    assert _conds(decision)["ScaledToZero"][:2] == ("False", "NotScaledToZero")


def test_136_activation_still_scales_from_zero():
    # promscaler's activation works the same in both releases: above the threshold, out of zero, to
    # ceil(6000m / 1) = 6, which the legacy scale-up limit max(2 x 0, 4) holds to 4.
    at_zero = inp(_zero_spec(activation="5"), 0, (), [external(6000)], scaled_to_zero=True, config=V136)
    decision = decide(replace(at_zero, native=False))
    assert decision.desired_replicas == 4
    assert decision.controls is not None and decision.controls.activation == "active"


# ---- HPAConfigurableTolerance: beta and on since 1.35, GA in 1.37 (#140107) ----------------------

@pytest.mark.parametrize("config", [V136, V137], ids=["1.36", "1.37"])
def test_behavior_tolerance_honoured_in_both(config):
    # On by default in 1.36 too: no difference at the defaults. 3 pods at 105% of a 100% CPU target
    # are within the cluster's 10% but not within scaleUp.tolerance 1%: ceil(1.05 x 3) = 4.
    s = spec([cpu_util(100)], behavior={"scaleUp": {"tolerance": "0.01"}})
    decision = decide(inp(s, 3, pods(3), [samples([1050] * 3)], config=config))
    assert decision.desired_replicas == 4
    assert features(config.kube_version).configurable_tolerance


# ---- Object metric errors in order (#139029) --------------------------------------------------------

@pytest.mark.parametrize("metric", [object_value("10"), object_avg("10")], ids=["Value", "AverageValue"])
def test_object_metric_error_wording(metric):
    # The PR's own before and after: "unable to get metric %s: %v on %s %s/%s" printed the kind where
    # the error belongs; 1.37's "unable to get metric %s on %s %s/%s: %w".
    err = "the server is currently unable to handle the request"
    base = inp(spec([metric]), 3, pods(3), [failure(err)])
    new = decide(replace(base, config=V137, namespace="prod"))
    old = decide(replace(base, config=V136, namespace="prod"))
    prefix = "the HPA was unable to compute the replica count: "
    assert _conds(new)["ScalingActive"] == (
        "False", "FailedGetObjectMetric", f"{prefix}unable to get metric hits on Service prod/svc: {err}")
    assert _conds(old)["ScalingActive"] == (
        "False", "FailedGetObjectMetric", f"{prefix}unable to get metric hits: Service on prod svc/{err}")
    assert new.proposals[0].error == f"unable to get metric hits on Service prod/svc: {err}"


# ---- AmbiguousSelector: several autoscalers select the same pods (#112011; store: #139142) ----------

def test_selecting_matches_each_selector_against_the_pods_labels():
    selectors = {
        "default/scaletestapp-hpa": parse_selector("app=scaletestapp"),
        "default/scaletestapp-hpa-rps": parse_selector("app in (scaletestapp,other)"),
        "default/other": parse_selector("app=other"),
        "default/canary": parse_selector("app=scaletestapp,track=canary"),
    }
    pod_labels = [{"app": "scaletestapp", "pod-template-hash": "5d8f"}] * 4
    assert selecting(pod_labels, selectors) == ["default/scaletestapp-hpa", "default/scaletestapp-hpa-rps"]
    assert selecting([], selectors) == []


def test_ambiguous_selector_stops_the_autoscaler_with_kubernetes_words():
    # The condition `kubectl describe hpa` shows for two HPAs on one Deployment (a 1.35 cluster):
    #   ScalingActive False AmbiguousSelector pods by selector app=scaletestapp are controlled by
    #   multiple HPAs: [default/scaletestapp-hpa default/scaletestapp-hpa-rps]
    found = overlap("app=scaletestapp", [{"app": "scaletestapp"}], {
        "default/scaletestapp-hpa-rps": parse_selector("app=scaletestapp"),
        "default/scaletestapp-hpa": parse_selector("app=scaletestapp"),
    })
    base = inp(spec([cpu_util(50)]), 4, pods(4), [samples([1000] * 4)])
    decision = decide(replace(base, overlap=found))
    assert decision.desired_replicas == 4 and not decision.scale
    assert _conds(decision)["ScalingActive"] == (
        "False", "AmbiguousSelector", "pods by selector app=scaletestapp are controlled by multiple HPAs: "
                                      "[default/scaletestapp-hpa default/scaletestapp-hpa-rps]")
    assert _conds(decision)["AbleToScale"][:2] == ("True", "SucceededGetScale")
    assert decision.current_metrics == []          # no metric is read


def test_only_itself_selecting_decides_as_usual():
    base = inp(spec([cpu_util(50)]), 4, pods(4), [samples([1000] * 4)])
    alone = SelectorOverlap("app=web", ("default/web",))
    decision = decide(replace(base, overlap=alone))
    assert decision.desired_replicas == 8      # 200% of a 50% target: 2 x 4
    assert _conds(decision)["ScalingActive"][1] == "ValidMetricFound"


# ---- the version itself -------------------------------------------------------------------------------

def test_supported_versions():
    assert supported_version("v1.36.4") == KubeVersion(1, 36)
    assert supported_version("1.37") == KubeVersion(1, 37)
    with pytest.raises(ValueError, match=r"^Kubernetes 1.35 is not one promscaler decides as \(want 1.36 or 1.37\)"):
        supported_version("1.35")
    assert ControllerConfig().kube_version == KubeVersion(1, 37)
