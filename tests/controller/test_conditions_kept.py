"""Status conditions set by type on the ones the autoscaler had, as horizontal.go's setCondition
does (setConditionInList on the object the sync read, `Conditions: hpa.Status.Conditions` in
setStatus): a condition a sync does not set stays as it was, lastTransitionTime and all; a new
type is appended; a set one keeps its lastTransitionTime while its status is unchanged."""

from __future__ import annotations

from datetime import UTC, datetime

from autoscaler.controller.status import build_status
from autoscaler.decision.model import Condition

from .conftest import (
    NS,
    autoscaler,
    conditions,
    deployment,
    eventually,
    pods_metric,
    replicas,
    running,
    settings,
    status,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
STALE = {"type": "ScaledToZero", "status": "True", "observedGeneration": 1,
         "lastTransitionTime": "2025-12-31T00:00:00Z",
         "reason": "ScaledToZero", "message": "the HPA controller scaled the workload to zero"}
LIMITED = {"type": "ScalingLimited", "status": "False", "observedGeneration": 1,
           "lastTransitionTime": "2025-12-31T00:00:00Z", "reason": "DesiredWithinRange",
           "message": "the desired count is within the acceptable range"}
ABLE = {"type": "AbleToScale", "status": "True", "observedGeneration": 1, "lastTransitionTime": "2025-12-31T00:00:00Z",
        "reason": "ReadyForNewScale", "message": "recommended size matches current size"}


def _write(previous: list[dict], conditions: list[Condition], generation: int | None) -> list[dict]:
    return build_status({"conditions": previous}, generation=generation, current_replicas=3, desired_replicas=3,
                        current_metrics=None, conditions=conditions, last_scale_time=None, now=T1)["conditions"]


def test_a_condition_the_sync_does_not_set_is_kept_as_it_was():
    # a 1.36 sync (no generation) of an HPA a 1.37 controller had scaled to zero and back to 3 by hand:
    # it sets AbleToScale and ScalingActive only; ScaledToZero and ScalingLimited stay, untouched.
    active = Condition("ScalingActive", "False", "FailedGetPodsMetric", "the HPA was unable to compute ...")
    got = _write([ABLE, STALE, LIMITED], [Condition("AbleToScale", "True", "SucceededGetScale", "m"), active], None)
    assert [c["type"] for c in got] == ["AbleToScale", "ScaledToZero", "ScalingLimited", "ScalingActive"]
    assert got[1] == STALE and got[2] == LIMITED
    assert got[0] == {"type": "AbleToScale", "status": "True", "lastTransitionTime": "2025-12-31T00:00:00Z",
                      "reason": "SucceededGetScale", "message": "m"}  # status unchanged: its time kept
    assert got[3]["lastTransitionTime"] == "2026-01-01T00:05:00Z"  # new: appended, at this sync's time


def test_observed_generation_only_on_the_conditions_set():
    # 1.37: the conditions this sync set record generation 2; the kept ones keep what they recorded.
    got = _write([ABLE, STALE], [Condition("AbleToScale", "False", "FailedGetScale", "x")], 2)
    assert got[0]["observedGeneration"] == 2 and got[0]["lastTransitionTime"] == "2026-01-01T00:05:00Z"
    assert got[1] == STALE


async def test_a_sync_without_metrics_keeps_the_last_scaling_limited(sim, fake):
    # horizontal.go: when no metric can be read it sets ScalingActive False and writes the status it
    # read otherwise unchanged, so the ScalingLimited of the last sync that computed one stays.
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = "1"
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "1")]))
    by_type = lambda: {c["type"]: c for c in status(sim, "web").get("conditions") or []}  # noqa: E731
    async with running(sim, settings()):
        await eventually(lambda: "ScalingLimited" in by_type() and by_type()["ScalingActive"]["status"] == "True")
        limited = by_type()["ScalingLimited"]
        fake.failing.add("http_requests")
        await eventually(lambda: by_type()["ScalingActive"]["reason"] == "FailedGetPodsMetric")
    assert by_type()["ScalingLimited"] == limited
    assert replicas(sim, "web") == 2


def test_a_controls_condition_goes_once_the_control_is_not_in_force():
    # Paused and Fallback are promscaler's, set by each sync while the control is in force
    # (docs/controls.md): a resumed autoscaler's status has no Paused left behind.
    paused = {"type": "Paused", "status": "True", "lastTransitionTime": "2025-12-31T00:00:00Z",
              "reason": "PausedByAnnotation", "message": "paused (promscaler.io/paused): hold 3 replicas"}
    got = _write([ABLE, paused, STALE], [Condition("AbleToScale", "True", "ReadyForNewScale", "m")], None)
    assert [c["type"] for c in got] == ["AbleToScale", "ScaledToZero"]


async def test_a_sync_that_fails_before_deciding_keeps_the_controls_condition(sim, fake):
    # a paused autoscaler whose target goes away: FailedGetScale, and still Paused (its annotation is
    # there; only a sync that decides sets or clears the controls' conditions, as status.control).
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = "1"
    paused = autoscaler("web", "web", [pods_metric("http_requests", "1")])
    paused["metadata"]["annotations"] = {"promscaler.io/paused": "true"}
    sim.apply(paused)
    async with running(sim, settings()):
        await eventually(lambda: conditions(sim, "web").get("Paused") == ("True", "PausedByAnnotation"))
        sim.delete("apps/v1", "Deployment", NS, "web")
        await eventually(lambda: conditions(sim, "web").get("AbleToScale") == ("False", "FailedGetScale"))
    assert conditions(sim, "web")["Paused"] == ("True", "PausedByAnnotation")
    assert status(sim, "web")["control"] == "Paused"


async def test_a_failed_scale_write_sets_no_scaled_to_zero(sim, fake):
    # horizontal.go sets ScaledToZero after a successful scale update only; a failed one sets
    # AbleToScale False / FailedUpdateScale and leaves ScaledToZero as it was (here: absent).
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = "500m"  # on target: stay at 2
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")]))
    async with running(sim, settings()) as controller:
        await eventually(lambda: conditions(sim, "web").get("ScalingActive") == ("True", "ValidMetricFound"))
        kube = controller.reconciler.kube
        original, writes = kube.request, [0]

        async def racing(method, path, *args, **kwargs):
            if method == "PUT" and path.endswith("/scale"):
                writes[0] += 1
                touched = sim.get("apps/v1", "Deployment", NS, "web")
                touched["metadata"].setdefault("annotations", {})["touched"] = str(writes[0])
                sim.apply(touched)  # someone else wrote it after our read: 409 Conflict
            return await original(method, path, *args, **kwargs)

        kube.request = racing  # type: ignore[method-assign]
        fake.pods[(NS, "http_requests")] = "1"  # 1 per pod against 500m: wants 4
        await eventually(lambda: conditions(sim, "web").get("AbleToScale") == ("False", "FailedUpdateScale"))
        assert "ScaledToZero" not in conditions(sim, "web") and replicas(sim, "web") == 2
        kube.request = original  # type: ignore[method-assign]
        await eventually(lambda: replicas(sim, "web") == 4)
        # once written, 1.37 sets it (False: not to zero) after the rescale, a Pods-metric autoscaler's too
        await eventually(lambda: conditions(sim, "web").get("ScaledToZero") == ("False", "NotScaledToZero"))
