"""`simulate` decides as the Kubernetes release a scenario names (`kubernetesVersion`) or the flag
names (`--kubernetes-version`), 1.37 by default: a target this autoscaler scaled to zero, whose
minReplicas has since been raised to 1. With HPAScaleToZero on (1.37's default) the controller
reads the metrics from zero: 120 messages at 30 per worker is ceil(120 / 30) = 4 workers (from
zero, outside any tolerance). With it off (1.36's default) the ScaledToZero condition does not
count: a target at zero is ScalingDisabled and stays there."""

from __future__ import annotations

import json
from pathlib import Path

from .test_simulate_cli import example, run_main, write


def _from_zero(version: str | None = None, min_replicas: int = 1) -> dict:
    doc = example("external-queue-average-value.yaml")
    doc["hpa"]["spec"]["minReplicas"] = min_replicas
    doc["hpa"]["status"] = {"conditions": [{"type": "ScaledToZero", "status": "True", "reason": "ScaledToZero"}]}
    doc["scaleTarget"] = {"spec": {"replicas": 0}, "status": {"replicas": 0, "selector": "app=worker"}}
    doc.pop("expect")
    if version is not None:
        doc["kubernetesVersion"] = version
    return doc


def _decided(tmp_path: Path, doc: dict, *flags: str) -> dict:
    rc, out, err = run_main(write(tmp_path, doc), "-o", "json", *flags)
    assert rc == 0, err
    decided = json.loads(out)
    decided["conditions"] = {c["type"]: {k: c[k] for k in ("status", "reason", "message")}
                             for c in decided["conditions"]}
    return decided


def test_scenario_names_the_release(tmp_path: Path):
    new = _decided(tmp_path, _from_zero())
    assert new["desiredReplicas"] == 4
    assert new["conditions"]["ScalingActive"]["reason"] == "ValidMetricFound"
    old = _decided(tmp_path, _from_zero("1.36"))
    assert old["desiredReplicas"] == 0 and old["scale"] is False
    assert old["conditions"]["ScalingActive"] == {
        "status": "False", "reason": "ScalingDisabled",
        "message": "scaling is disabled since the replica count of the target is zero"}


def test_flag_is_the_default_and_the_scenario_wins(tmp_path: Path):
    assert _decided(tmp_path, _from_zero(), "--kubernetes-version", "1.36")["desiredReplicas"] == 0
    assert _decided(tmp_path, _from_zero("v1.37.1"), "--kubernetes-version", "1.36")["desiredReplicas"] == 4


def test_136_refuses_min_replicas_zero(tmp_path: Path):
    rc, out, err = run_main(write(tmp_path, _from_zero("1.36", min_replicas=0)), "-o", "json")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1
    assert "hpa.spec.minReplicas: must be greater than or equal to 1 (Kubernetes 1.36" in err


def test_unknown_release_is_one_line(tmp_path: Path):
    rc, _, err = run_main(write(tmp_path, _from_zero("1.35")), "-o", "json")
    assert rc == 2 and err.count("\n") == 1
    assert "kubernetesVersion: Kubernetes 1.35 is not one promscaler decides as (want 1.36 or 1.37)" in err
    rc, _, err = run_main(write(tmp_path, _from_zero()), "--kubernetes-version", "latest")
    assert rc == 2 and err.count("\n") == 1 and "--kubernetes-version" in err and "'latest'" in err


def test_136_horizontal_autoscaler_scales_to_and_from_zero(tmp_path: Path):
    # promscaler's own scaling to zero needs no gate: as 1.37's HPA, on 1.36 too.
    doc = _from_zero("1.36", min_replicas=0)
    doc["hpa"].update(apiVersion="promscaler.io/v1alpha1", kind="HorizontalAutoscaler")
    decided = _decided(tmp_path, doc)
    assert decided["desiredReplicas"] == 4
    assert decided["conditions"]["ScaledToZero"]["reason"] == "NotScaledToZero"


def test_the_report_says_which_release_decided_when_not_the_current(tmp_path: Path):
    rc, out, err = run_main(write(tmp_path, _from_zero("1.36")))
    assert rc == 0, err
    assert "decided as Kubernetes 1.36's HPA controller" in out
    rc, out, _ = run_main(write(tmp_path, _from_zero()))
    assert rc == 0 and "decided as Kubernetes" not in out


def test_the_status_keeps_the_conditions_a_sync_does_not_set(tmp_path: Path):
    # horizontal.go sets conditions by type on the status it read: 1.36 never sets ScaledToZero, so the
    # True a 1.37 controller left stays in the status it writes (and is not read: ScalingDisabled).
    old = _decided(tmp_path, _from_zero("1.36"))
    assert old["conditions"]["ScaledToZero"]["status"] == "True"
    assert old["conditions"]["ScalingActive"]["reason"] == "ScalingDisabled"
    # 1.37 at zero with an empty queue: no rescale, so ScaledToZero is not set again, and stays True.
    doc = _from_zero(min_replicas=0)
    doc["metrics"]["external"][0]["value"] = "0"
    stays = _decided(tmp_path, doc)
    assert stays["scale"] is False and stays["conditions"]["ScaledToZero"]["status"] == "True"
