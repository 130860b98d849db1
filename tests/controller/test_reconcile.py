"""The controller against KubeSim over real HTTP: scaling through /scale, status, conditions,
events, stabilization, failing metrics, conflicts and dry-run."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from autoscaler.decision.model import ControllerConfig
from promscaler.kubeapi import ApiError

from .conftest import (
    NS,
    autoscaler,
    conditions,
    deployment,
    events,
    eventually,
    external_metric,
    more_syncs,
    pods_metric,
    replicas,
    running,
    settings,
    status,
)


def per_pod(total_milli: int):
    """A workload whose per-pod rate is total load / replicas."""
    return lambda names: f"{math.ceil(total_milli / max(1, len(names)))}m"


async def test_scales_up_through_scale_and_writes_status_conditions_events(sim, fake):
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(2000)  # 1 req/s per pod at 2 replicas; target 500m -> 4
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")]))
    async with running(sim, settings()) as controller:
        await eventually(lambda: replicas(sim, "web") == 4)
        st = await eventually(lambda: (s := status(sim, "web")).get("currentReplicas") == 4 and s)
        await more_syncs(controller)  # several more syncs: at 500m per pod it must stay at 4
        assert replicas(sim, "web") == 4
    st = status(sim, "web")
    assert st["desiredReplicas"] == 4 and st["currentReplicas"] == 4
    assert (
        st["observedGeneration"]
        == sim.get("promscaler.io/v1alpha1", "HorizontalAutoscaler", NS, "web")["metadata"]["generation"]
    )
    assert "lastScaleTime" in st
    metric = st["currentMetrics"][0]
    assert metric["type"] == "Pods" and metric["pods"]["metric"]["name"] == "http_requests"
    conds = conditions(sim, "web")
    assert conds["AbleToScale"][0] == "True"
    assert conds["ScalingActive"] == ("True", "ValidMetricFound")
    assert conds["ScalingLimited"] == ("False", "DesiredWithinRange")
    rescales = [e for e in events(sim, "web") if e[1] == "SuccessfulRescale"]
    assert rescales == [("Normal", "SuccessfulRescale", "New size: 4; reason: pods metric http_requests above target")]


async def test_scale_down_waits_out_the_stabilization_window(sim, fake):
    sim.apply(deployment("web", 4))
    fake.pods[(NS, "http_requests")] = "100m"  # far below the 500m target: wants 1
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 2}}
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")], behavior=behavior))
    now = [datetime(2026, 1, 1, tzinfo=UTC)]  # the controller's clock, moved by hand: the window is
    async with running(sim, settings()) as controller:  # measured on it, not on how fast syncs run
        controller.reconciler.clock = lambda: now[0]
        await eventually(lambda: conditions(sim, "web").get("AbleToScale", ("", ""))[1] == "ScaleDownStabilized")
        now[0] += timedelta(seconds=1.9)  # within the 2 s from the first sync's recommendation (the current 4)
        await more_syncs(controller)
        assert replicas(sim, "web") == 4  # recommended 1, held at 4 by the window
        now[0] += timedelta(seconds=0.2)  # the window has passed
        await eventually(lambda: replicas(sim, "web") == 1)
    assert [e[2] for e in events(sim, "web") if e[1] == "SuccessfulRescale"] == [
        "New size: 1; reason: All metrics below target"
    ]


async def test_a_failing_metric_blocks_scale_down_but_not_scale_up(sim, fake):
    sim.apply(deployment("web", 4))
    fake.pods[(NS, "http_requests")] = "100m"  # wants 1
    fake.failing.add("queue_messages_ready")
    metrics = [pods_metric("http_requests", "500m"), external_metric("queue_messages_ready", "30", {"queue": "tasks"})]
    sim.apply(autoscaler("web", "web", metrics))
    async with running(sim, settings()) as controller:
        await eventually(lambda: any(e[1] == "FailedGetExternalMetric" for e in events(sim, "web")))
        await eventually(lambda: status(sim, "web").get("desiredReplicas") == 4)
        await more_syncs(controller)
        assert replicas(sim, "web") == 4  # no scale-down while one metric is unknown
        assert conditions(sim, "web")["ScalingActive"][0] == "False"
        fake.pods[(NS, "http_requests")] = "1"  # now wants 8: scale-up proceeds despite the failure
        await eventually(lambda: replicas(sim, "web") == 8)
    warning = next(e for e in events(sim, "web") if e[1] == "FailedGetExternalMetric")
    assert warning[0] == "Warning" and "queue_messages_ready" in warning[2]


async def test_missing_target_reports_failed_get_scale(sim, fake):
    sim.apply(autoscaler("orphan", "nonexistent", [pods_metric("http_requests", "500m")]))
    async with running(sim, settings()):
        await eventually(lambda: conditions(sim, "orphan").get("AbleToScale") == ("False", "FailedGetScale"))
        await eventually(lambda: any(e[1] == "FailedGetScale" for e in events(sim, "orphan")))


async def test_status_conflict_is_retried(sim, fake, monkeypatch):
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(2000)
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")]))
    conflicts: list[int] = []
    async with running(sim, settings()) as controller:
        kube = controller.reconciler.kube
        original = kube.request

        async def racing(method, path, *args, **kwargs):
            if method == "PUT" and path.endswith("/status") and not conflicts:
                # someone else writes the object between our read and our write
                obj = sim.get("promscaler.io/v1alpha1", "HorizontalAutoscaler", NS, "web")
                obj["metadata"].setdefault("annotations", {})["touched"] = "yes"
                sim.apply(obj)
                try:
                    return await original(method, path, *args, **kwargs)
                except ApiError as exc:
                    conflicts.append(exc.status)
                    raise
            return await original(method, path, *args, **kwargs)

        monkeypatch.setattr(kube, "request", racing)
        await eventually(lambda: status(sim, "web").get("currentReplicas") == 4)
    assert conflicts == [409]
    obj = sim.get("promscaler.io/v1alpha1", "HorizontalAutoscaler", NS, "web")
    assert obj["metadata"]["annotations"]["touched"] == "yes"  # the other writer's change survived


async def test_dry_run_decides_and_reports_but_never_writes_scale(sim, fake):
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(2000)
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")]))
    async with running(sim, settings(dry_run=True)) as controller:
        await eventually(lambda: status(sim, "web").get("desiredReplicas") == 4)
        await more_syncs(controller)
    assert replicas(sim, "web") == 2
    assert status(sim, "web")["currentReplicas"] == 2
    assert not [e for e in events(sim, "web") if e[1] == "SuccessfulRescale"]


async def test_spec_change_is_picked_up_from_the_watch(sim, fake):
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = "1"
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")], max_replicas=3))
    async with running(sim, settings(sync_period=30.0)):  # no resync during the test: only watch events
        await eventually(lambda: replicas(sim, "web") == 3)
        await eventually(lambda: conditions(sim, "web").get("ScalingLimited") == ("True", "TooManyReplicas"))
        sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")], max_replicas=5))
        await eventually(lambda: replicas(sim, "web") == 5)


async def test_controller_flags_reach_the_decision(sim, fake):
    # a 0.5 tolerance: 1.4x the target is within tolerance, so no scale
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(1400)  # 700m per pod at 2 replicas
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")]))
    cfg = ControllerConfig(tolerance=0.5, downscale_stabilization_window=0.0)
    async with running(sim, settings(config=cfg)) as controller:
        await eventually(lambda: status(sim, "web").get("desiredReplicas") == 2)
        await more_syncs(controller)
        assert replicas(sim, "web") == 2
        # 3.2x at 2 pods -> 7 wanted, legacy scale-up limit max(2*2, 4) = 4; at 4 pods 1.6x -> 7;
        # at 7 pods 0.91x is within tolerance: it stays.
        fake.pods[(NS, "http_requests")] = per_pod(3200)
        await eventually(lambda: replicas(sim, "web") == 7)
        await more_syncs(controller)
        assert replicas(sim, "web") == 7
    sizes = [e[2].split(";")[0] for e in events(sim, "web") if e[1] == "SuccessfulRescale"]
    assert sorted(sizes) == ["New size: 4", "New size: 7"]


async def test_resource_cpu_utilization_through_metrics_api(sim, fake):
    sim.apply(deployment("web", 2))  # each pod requests 500m cpu
    await eventually(lambda: len(sim.list("v1", "Pod", NS)) == 2)
    for pod in sim.list("v1", "Pod", NS):
        sim.set_pod_usage(NS, pod["metadata"]["name"], {"app": {"cpu": "500m", "memory": "100Mi"}})  # 100% of request
    cpu = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
    sim.apply(autoscaler("web", "web", [cpu]))
    async with running(sim, settings()):
        await eventually(lambda: replicas(sim, "web") == 4)
        await eventually(lambda: status(sim, "web").get("currentReplicas") == 4)
    current = status(sim, "web")["currentMetrics"][0]["resource"]["current"]
    assert current["averageUtilization"] == 100
    assert [e[2] for e in events(sim, "web") if e[1] == "SuccessfulRescale"] == [
        "New size: 4; reason: cpu resource utilization (percentage of request) above target"
    ]


async def test_a_pod_reporting_other_containers_is_a_missing_pod_for_container_resource(sim, fake):
    # Kubernetes 1.36 getContainerMetrics: web's third pod reports only a sidecar, so it has no
    # `app` metric (no longer a failed metric). app at 750m of 500m = 150% vs 50% -> ratio 3; the
    # missing pod counts 0% on a scale-up: (750 + 750 + 0) / 1500 = 100% -> ratio 2 -> 6. At 6,
    # the three new pods are missing too: 1500 / 3000 = 50% -> ratio 1: it stays at 6.
    sim.apply(deployment("web", 3))
    await eventually(lambda: len(sim.list("v1", "Pod", NS)) == 3)
    names = sorted(p["metadata"]["name"] for p in sim.list("v1", "Pod", NS))
    for name in names[:2]:
        sim.set_pod_usage(NS, name, {"app": {"cpu": "750m", "memory": "100Mi"}})
    sim.set_pod_usage(NS, names[2], {"sidecar": {"cpu": "750m", "memory": "100Mi"}})
    cpu = {"type": "ContainerResource", "containerResource": {
        "name": "cpu", "container": "app", "target": {"type": "Utilization", "averageUtilization": 50}}}
    sim.apply(autoscaler("web", "web", [cpu]))
    async with running(sim, settings()) as controller:
        await eventually(lambda: replicas(sim, "web") == 6)
        await eventually(lambda: status(sim, "web").get("currentReplicas") == 6)
        await more_syncs(controller)
        assert replicas(sim, "web") == 6
    assert conditions(sim, "web")["ScalingActive"] == ("True", "ValidMetricFound")
    assert status(sim, "web")["currentMetrics"][0]["containerResource"]["current"]["averageUtilization"] == 150
    assert not [e for e in events(sim, "web") if e[0] == "Warning"]


async def test_native_hpas_are_reconciled_when_enabled(sim, fake):
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(2000)
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")], kind="HorizontalPodAutoscaler"))
    sim.apply(deployment("api", 2))  # a HorizontalAutoscaler beside it: its syncs show the controller at work
    sim.apply(autoscaler("api", "api", [pods_metric("http_requests", "500m")]))
    async with running(sim, settings()) as controller:  # not enabled: native HPAs are left alone
        await eventually(lambda: replicas(sim, "api") == 4)
        await more_syncs(controller)
        assert replicas(sim, "web") == 2
        assert not sim.get("autoscaling/v2", "HorizontalPodAutoscaler", NS, "web").get("status")
    async with running(sim, settings(reconcile_native_hpas=True)):
        await eventually(lambda: replicas(sim, "web") == 4)
        hpa_status = lambda: (sim.get("autoscaling/v2", "HorizontalPodAutoscaler", NS, "web").get("status") or {})  # noqa: E731
        await eventually(lambda: hpa_status().get("currentReplicas") == 4)
    event = next(e for e in sim.list("v1", "Event", NS)
                 if e["reason"] == "SuccessfulRescale" and e["involvedObject"]["name"] == "web")
    assert event["involvedObject"]["kind"] == "HorizontalPodAutoscaler"


async def test_namespace_flag_restricts_what_is_watched(sim, fake):
    for ns in (NS, "other"):
        sim.apply(deployment("web", 2, ns=ns))
        fake.pods[(ns, "http_requests")] = per_pod(2000)
        sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")], ns=ns))
    async with running(sim, settings(namespace="other")) as controller:
        await eventually(lambda: replicas(sim, "web", "other") == 4)
        await more_syncs(controller)
    assert replicas(sim, "web", NS) == 2 and not status(sim, "web", NS)


async def test_custom_metrics_v1beta1_is_used_when_v1beta2_is_not_served(sim):
    from .conftest import pods_matching
    from .fakemetrics import FakeMetrics

    old = FakeMetrics(lambda ns, sel: pods_matching(sim, ns, sel), versions=("v1beta1",)).start()
    try:
        sim.set_aggregated_api("custom.metrics.k8s.io", old.url, versions=("v1beta1",))
        sim.apply(deployment("web", 2))
        old.pods[(NS, "http_requests")] = per_pod(2000)
        sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")]))
        async with running(sim, settings()):
            await eventually(lambda: replicas(sim, "web") == 4)
        assert old.versions_asked == {"v1beta1"}
    finally:
        old.stop()


async def test_preferred_custom_metrics_version_is_v1beta2(sim, fake):
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(2000)
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")]))
    async with running(sim, settings()):
        await eventually(lambda: replicas(sim, "web") == 4)
    assert fake.versions_asked == {"v1beta2"}


async def test_object_metric_resolved_through_discovery_scales_a_statefulset(sim, fake):
    labels = {"app": "db"}
    sim.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": NS},
            "spec": {
                "replicas": 1,
                "serviceName": "db",
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "db", "image": "db:1"}]}},
            },
        }
    )
    fake.objects[(NS, "services", "db", "connections")] = "90"  # 90 connections, 30 per replica wanted -> 3
    ha = autoscaler("db", "db", [{"type": "Object", "object": {
        "describedObject": {"apiVersion": "v1", "kind": "Service", "name": "db"},
        "metric": {"name": "connections"}, "target": {"type": "AverageValue", "averageValue": "30"}}}])
    ha["spec"]["scaleTargetRef"] = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"}
    sim.apply(ha)
    async with running(sim, settings()):
        await eventually(lambda: sim.get("apps/v1", "StatefulSet", NS, "db")["spec"]["replicas"] == 3)
        await eventually(lambda: status(sim, "db").get("currentReplicas") == 3)
    metric = status(sim, "db")["currentMetrics"][0]
    assert metric["type"] == "Object" and metric["object"]["describedObject"]["name"] == "db"


async def test_a_hostile_value_from_a_metrics_api_is_a_failed_metric_not_a_crashed_sync(sim, fake):
    """An adapter answering a value no quantity can hold (1e400): ScalingActive=False with Kubernetes'
    reason and a Warning event naming the field, while the controller keeps syncing."""
    sim.apply(deployment("web", 2))
    fake.external[(NS, "queue_messages_ready")] = [({"queue": "tasks"}, "1e400")]
    sim.apply(autoscaler("web", "web", [external_metric("queue_messages_ready", "30", {"queue": "tasks"})]))
    async with running(sim, settings()) as controller:
        await eventually(lambda: conditions(sim, "web").get("ScalingActive", ("",))[0] == "False")
        await eventually(lambda: any(e[1] == "FailedGetExternalMetric" for e in events(sim, "web")))
        await more_syncs(controller)  # still syncing: no crash, and it stays put
        assert replicas(sim, "web") == 2
        assert conditions(sim, "web")["ScalingActive"][1] == "FailedGetExternalMetric"
        fake.external[(NS, "queue_messages_ready")] = [({"queue": "tasks"}, "150")]  # the adapter recovers
        await eventually(lambda: replicas(sim, "web") == 5)  # 150 / 30
    warning = next(e for e in events(sim, "web") if e[1] == "FailedGetExternalMetric")
    assert warning[0] == "Warning" and "1e400" in warning[2]
