"""Shadow mode (`--dry-run --reconcile-native-hpas`) beside a real HPA controller, on a cluster
without the HorizontalAutoscaler CRD.

The test plays kube-controller-manager's HPA controller: every sync period it writes the target's
scale (through the /scale subresource) and the HPA's status (currentReplicas, desiredReplicas,
lastScaleTime, conditions), as the HPA controller does, following a script whose numbers were
worked out by hand from the Kubernetes algorithm (including scale-downs limited by a Pods policy
of 1 pod per 4 s, i.e. per two syncs). The shadow must agree with it decision by decision, write
nothing at all, and say so in its counters and its /debug/shadow summary.

Which status each comparison sees, and which scale events fall in a policy's period, depend on
the shadow's sync times relative to the real HPA's. Played on the wall clock, a real sync 0.3 s
slow or a shadow sync 0.5 s late (a loaded machine) changes the outcome; so the decision-by-decision
test runs both controllers on one clock moved by the script (`Lockstep`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import kubernetes
import pytest
import yaml

from kubesim.apiserver import KubeSim
from promscaler.selectors import parse_selector
from promscaler.times import format_time

from .conftest import (
    NS,
    ROOT,
    autoscaler,
    deployment,
    eventually,
    metrics_upstream,
    pods_matching,
    pods_metric,
    running,
    settings,
)

HPA_API = ("autoscaling/v2", "HorizontalPodAutoscaler")
KEY = ("HorizontalPodAutoscaler", NS, "web")
PERIOD = 2.0  # the sync period of both controllers
LEAD = 0.4  # the shadow syncs this long before the real HPA: a fifth of the period (docs/autoscaler.md, shadow mode)
BEHAVIOR = {
    "scaleDown": {"stabilizationWindowSeconds": 0, "policies": [{"type": "Pods", "value": 1, "periodSeconds": 4}]},
    "scaleUp": {"stabilizationWindowSeconds": 0, "policies": [{"type": "Pods", "value": 4, "periodSeconds": 4}]},
}

# The real HPA's syncs: (total load in milli-requests/s before the sync, replicas before, replicas
# decided, ScalingLimited reason). Target 500m per pod; a Pods policy counts the scale events of
# the last 4 s, i.e. of the previous sync only (a sync two periods back is out, as the HPA
# controller re-queues after each sync and so always runs a little later than 2 x 2 s).
SCRIPT: list[tuple[int, int, int, str]] = [
    (2000, 4, 4, "DesiredWithinRange"),   # 500m per pod: on target
    (400, 4, 3, "ScaleDownLimit"),        # 100m per pod wants 1; 1 pod per 4 s from 4
    (400, 3, 3, "ScaleDownLimit"),        # wants 1; the period started at 4: at most 1 down -> 3
    (400, 3, 2, "ScaleDownLimit"),        # the first scale-down left the period: 3 -> 2
    (400, 2, 2, "ScaleDownLimit"),
    (400, 2, 1, "DesiredWithinRange"),    # wants 1 = the limit
    (400, 1, 1, "DesiredWithinRange"),    # 400m at 1 pod: 0.8 -> 1
    (3000, 1, 5, "ScaleUpLimit"),         # 3000m at 1 pod wants 6; 4 pods per 4 s -> 5
    (3000, 5, 5, "ScaleUpLimit"),         # 600m per pod wants 6; the period started at 1 -> 5
    (3000, 5, 6, "DesiredWithinRange"),   # the scale-up left the period
    (3000, 6, 6, "DesiredWithinRange"),   # 500m per pod: on target
    (3000, 6, 6, "DesiredWithinRange"),   # same status: the HPA controller writes nothing
]
LIMITED = {
    "ScaleDownLimit": "the desired replica count is decreasing faster than the maximum scale rate",
    "ScaleUpLimit": "the desired replica count is increasing faster than the maximum scale rate",
    "DesiredWithinRange": "the desired count is within the acceptable range",
}


def per_pod(total_milli: int):
    return lambda names: f"{math.ceil(total_milli / max(1, len(names)))}m"


@pytest.fixture
def bare():
    """A cluster with native HPAs only: the sandbox's HorizontalAutoscaler CRD removed."""
    with KubeSim(ready_delay=0.0) as s:
        s.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "horizontalautoscalers.promscaler.io")
        yield s


@pytest.fixture
def metrics(bare):
    with metrics_upstream(bare) as f:
        yield f


class RealHpa:
    """kube-controller-manager's HPA controller, played from a script: scale first, then status."""

    def __init__(self, sim: KubeSim, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        api = kubernetes.client.ApiClient(sim.client_configuration())
        self.apps = kubernetes.client.AppsV1Api(api)
        self.autoscaling = kubernetes.client.AutoscalingV2Api(api)
        self.clock = clock
        self.status: dict[str, Any] = {}
        self.writes = 0

    def sync(self, current: int, desired: int, limited: str, per_pod_milli: int, write_scale: bool = True) -> None:
        now = format_time(self.clock())
        if desired != current and write_scale:
            self.apps.patch_namespaced_deployment_scale("web", NS, {"spec": {"replicas": desired}})
        able = (("SucceededRescale", f"the HPA controller was able to update the target scale to {desired}")
                if desired != current else ("ReadyForNewScale", "recommended size matches current size"))
        status = {
            "currentReplicas": current, "desiredReplicas": desired,
            "lastScaleTime": now if desired != current else self.status.get("lastScaleTime"),
            "currentMetrics": [{"type": "Pods", "pods": {"metric": {"name": "http_requests"},
                                                         "current": {"averageValue": f"{per_pod_milli}m"}}}],
            "conditions": [
                self._condition("AbleToScale", "True", *able),
                self._condition("ScalingActive", "True", "ValidMetricFound", "the HPA was able to successfully "
                                "calculate a replica count from pods metric http_requests"),
                self._condition("ScalingLimited", "False" if limited == "DesiredWithinRange" else "True", limited,
                                LIMITED[limited]),
            ],
        }
        if status["lastScaleTime"] is None:
            del status["lastScaleTime"]
        if status != self.status:  # as updateStatusIfNeeded: an unchanged status is not written
            self.autoscaling.patch_namespaced_horizontal_pod_autoscaler_status("web", NS, {"status": status})
            self.writes += 1
            self.status = status

    def _condition(self, type_: str, status: str, reason: str, message: str) -> dict[str, str]:
        old = next((c for c in self.status.get("conditions") or () if c["type"] == type_), None)
        since = old["lastTransitionTime"] if old and old["status"] == status else format_time(self.clock())
        return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": since}


class Lockstep:
    """One clock for both controllers, moved by the script, and the shadow's syncs taken in turns.

    The shadow's reconciler and book read this clock (both accept one) and the real HPA stamps its
    status with it, so every time the shadow decides with (its sync, the date of its decision, the
    real scale events it counts) comes from the script: the real HPA syncs at its script times, the
    shadow at the times its own schedule asks for (its last sync plus the delay it queued). The wall
    clock only says when the shadow's timer fires: a sync then waits for its turn, given once the
    state it reads is in place, so a slow machine makes the test slower, never different."""

    def __init__(self, controller, now: datetime) -> None:
        self.controller = controller
        self.now = now
        self.shadow_syncs: list[datetime] = []  # when the shadow synced, on this clock
        self.asked: list[float] = []            # the delays it queued its next sync with
        self._turn = asyncio.Event()
        self._free = False
        controller.reconciler.clock = controller.shadow.clock = self
        sync, add_after = controller.reconciler.sync, controller.queue.add_after

        async def on_turn(key):
            await self._turn.wait()
            if not self._free:
                self._turn.clear()
            return await sync(key)

        def recording(key, delay: float) -> None:
            self.asked.append(delay)
            add_after(key, delay)

        controller.reconciler.sync = on_turn
        controller.queue.add_after = recording

    def __call__(self) -> datetime:
        return self.now

    async def shadow_sync(self) -> None:
        """The shadow's next sync, at the time it asked for (the first one at the clock's time)."""
        if self.shadow_syncs:
            self.now = self.shadow_syncs[-1] + timedelta(seconds=self.asked[-1])
        self.shadow_syncs.append(self.now)
        done = self.controller.syncs + 1
        self._turn.set()
        await eventually(lambda: self.controller.syncs >= done)

    def release(self) -> None:
        """Back to the shadow's own pace (for shutdown: an in-flight sync is waited for)."""
        self._free = True
        self._turn.set()


def pods_seen(controller, sim: KubeSim, replicas: int) -> bool:
    """The target has `replicas` running pods, and the controller's pod cache holds just those."""
    selector = parse_selector("app=web")
    cached = [controller.pods.info(key) for key in controller.pods.select(NS, selector)]
    names = pods_matching(sim, NS, "app=web")
    return (len(names) == replicas and sorted(p.name for p in cached if p) == names
            and all(p and p.phase == "Running" and p.ready for p in cached))


def record_requests(controller) -> list[tuple[str, str]]:
    """Every request the controller sends: (method, path)."""
    sent: list[tuple[str, str]] = []
    send = controller.kube._send

    async def recording(method, path, *args, **kwargs):
        sent.append((method, path))
        return await send(method, path, *args, **kwargs)

    controller.kube._send = recording
    return sent


def comparisons(controller) -> list[tuple[int, int]]:
    hpa = controller.shadow.hpas.get(KEY)
    return [(c.ours, c.theirs) for c in (hpa.compared if hpa else ())]


async def test_shadow_agrees_with_the_real_hpa_decision_by_decision_and_writes_nothing(bare, metrics, caplog):
    caplog.set_level(logging.INFO, logger="autoscaler")
    bare.apply(deployment("web", 4))
    metrics.pods[(NS, "http_requests")] = per_pod(SCRIPT[0][0])
    bare.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")], behavior=BEHAVIOR,
                          kind="HorizontalPodAutoscaler"))
    await eventually(lambda: len(pods_matching(bare, NS, "app=web")) == 4)
    start = datetime.now(UTC).replace(microsecond=0)
    real_syncs = [start + timedelta(seconds=0.3 + k * PERIOD) for k in range(len(SCRIPT))]
    s = settings(dry_run=True, reconcile_native_hpas=True, sync_period=PERIOD, http_port=0, http_host="127.0.0.1")
    async with running(bare, s) as controller:
        sent = record_requests(controller)
        clock = Lockstep(controller, start)  # before the controller's first sync: it has not run yet
        real = RealHpa(bare, clock)
        try:
            await eventually(lambda: pods_seen(controller, bare, 4))
            await clock.shadow_sync()  # the shadow's first decision, before the real HPA's first sync
            port = await eventually(lambda: controller.http_port)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
                assert (await http.get("/readyz")).status_code == 200  # ready without the CRD
                for k, (load, current, desired, limited) in enumerate(SCRIPT):
                    clock.now = real_syncs[k]
                    writes = real.writes
                    await asyncio.to_thread(real.sync, current, desired, limited, math.ceil(load / current))
                    if real.writes > writes:  # seen by the shadow: it settles the comparison of its last decision
                        await eventually(lambda n=k + 1: len(comparisons(controller)) == n)
                    # what the shadow's next sync reads: the target's pods, their metric
                    await eventually(lambda n=desired: pods_seen(controller, bare, n))
                    if k + 1 < len(SCRIPT):
                        metrics.pods[(NS, "http_requests")] = per_pod(SCRIPT[k + 1][0])
                    await clock.shadow_sync()
                # the last decision is compared at the shadow's next sync: the real status held
                assert len(comparisons(controller)) == len(SCRIPT)
                summary = (await http.get("/debug/shadow")).text
                summary_json = (await http.get("/debug/shadow", params={"format": "json"})).json()
                exported = (await http.get("/metrics")).text
        finally:
            clock.release()

    # the shadow locked onto the real HPA's phase: from the sync after it first saw a status update
    # (its own schedule until then), it synced LEAD before each real sync
    assert clock.shadow_syncs[2:] == [t - timedelta(seconds=LEAD) for t in real_syncs[2:]] + [
        real_syncs[-1] + timedelta(seconds=PERIOD - LEAD)]
    assert real_syncs[0] < clock.shadow_syncs[1] < real_syncs[1]
    expected = [(d, d) for _, _, d, _ in SCRIPT]
    assert comparisons(controller)[:len(SCRIPT)] == expected
    assert real.writes == len(SCRIPT) - 1  # the last sync changed nothing: compared as "status held"
    # it wrote nothing: no status, scale, event or lease
    assert {m for m, _ in sent} == {"GET"}, [r for r in sent if r[0] != "GET"]
    assert not bare.list("v1", "Event") and not bare.list("coordination.k8s.io/v1", "Lease")
    assert bare.get("apps/v1", "Deployment", NS, "web")["spec"]["replicas"] == SCRIPT[-1][2]
    # counters and summary say what happened
    n = len(comparisons(controller))
    assert f'promscaler_shadow_decisions_total{{agree="true",name="web",namespace="{NS}"}} {float(n)}' in exported
    assert 'agree="false"' not in exported
    assert f'promscaler_shadow_replica_difference_count {float(n)}' in exported
    assert summary.startswith(f"agreed on {n} of {n} decisions over the last hour\n")
    assert summary_json["decisions"] == n and summary_json["agreed"] == n and summary_json["disagreements"] == []
    messages = [r.getMessage() for r in caplog.records]
    assert sum("CRD (promscaler.io/v1alpha1) is not installed" in m for m in messages) == 1
    assert not [m for m in messages if "watch failed" in m or "shadow disagrees" in m]


async def test_a_lasting_disagreement_is_counted_logged_once_with_both_explanations(bare, metrics, caplog):
    caplog.set_level(logging.INFO, logger="autoscaler")
    bare.apply(deployment("web", 2))
    metrics.pods[(NS, "http_requests")] = per_pod(1000)  # 500m per pod at 2: the shadow wants 2
    bare.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")], kind="HorizontalPodAutoscaler"))
    real = RealHpa(bare)
    s = settings(dry_run=True, reconcile_native_hpas=True, sync_period=0.5, http_port=None)
    async with running(bare, s) as controller:
        await eventually(lambda: controller.syncs >= 1)
        # a real HPA that (for reasons of its own) holds 3 desired
        await asyncio.to_thread(real.sync, 2, 3, "DesiredWithinRange", 500, False)
        await eventually(lambda: len(comparisons(controller)) >= 4)
        assert controller.shadow is not None
        summary = controller.shadow.summary()
    assert set(comparisons(controller)) == {(2, 3)}
    registry = controller.telemetry.registry
    labels = {"namespace": NS, "name": "web", "agree": "false"}
    bad = registry.get_sample_value("promscaler_shadow_decisions_total", labels)
    assert bad is not None and bad >= 3
    below = registry.get_sample_value("promscaler_shadow_replica_difference_bucket", {"le": "-1.0"})
    assert below is not None and below >= 3
    warnings = [r for r in caplog.records if "shadow disagrees" in r.getMessage()]
    assert len(warnings) == 1  # logged once, when it outlived one sync period
    assert warnings[0].promscaler_desired == 2 and warnings[0].cluster_desired == 3
    assert any("AbleToScale" in line for line in warnings[0].cluster_explanation)
    assert warnings[0].promscaler_explanation
    assert summary["disagreements"] and summary["disagreements"][-1]["cluster"] == 3
    assert summary["agreed"] < summary["decisions"]


async def test_the_crd_is_picked_up_when_installed_later(bare, metrics, caplog):
    caplog.set_level(logging.INFO, logger="autoscaler")
    bare.apply(deployment("web", 2))
    metrics.pods[(NS, "http_requests")] = per_pod(2000)
    s = settings(dry_run=True, reconcile_native_hpas=True, http_port=0, http_host="127.0.0.1")
    async with running(bare, s) as controller:
        controller.informers["HorizontalAutoscaler"].absent_poll = 0.2
        port = await eventually(lambda: controller.http_port)
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200
        bare.apply(yaml.safe_load((ROOT / "apiservice/horizontalautoscaler-crd.yaml").read_text()))
        bare.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")]))
        # its own autoscalers get a status even in dry-run: it is reconciled
        await eventually(lambda: ((bare.get("promscaler.io/v1alpha1", "HorizontalAutoscaler", NS, "web") or {})
                                  .get("status") or {}).get("desiredReplicas") == 4)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("is not installed" in m for m in messages) == 1
    assert any("horizontalautoscalers are served now" in m for m in messages)
    assert not [m for m in messages if "watch failed" in m]
    assert bare.get("apps/v1", "Deployment", NS, "web")["spec"]["replicas"] == 2  # dry-run: no scale write
