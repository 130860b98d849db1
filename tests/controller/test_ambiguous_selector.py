"""Two autoscalers on the same pods stop, as kube-controller-manager stops two HPAs (#112011; its
selector store since 1.37, #139142): ScalingActive False / AmbiguousSelector naming both, the
Warning Events AmbiguousSelector and FailedComputeMetricsReplicas with the same words (what
`kubectl describe hpa` shows on a real cluster), and no scaling. Once one is deleted, the other
scales again."""

from __future__ import annotations

from .conftest import (
    NS,
    autoscaler,
    conditions,
    deployment,
    events,
    eventually,
    more_syncs,
    pods_metric,
    replicas,
    running,
    settings,
    sharded,
    status,
)
from .test_reconcile import per_pod

MESSAGE = f"pods by selector app=web are controlled by multiple HPAs: [{NS}/web-a {NS}/web-b]"
BOTH = {("Warning", "AmbiguousSelector", MESSAGE), ("Warning", "FailedComputeMetricsReplicas", MESSAGE)}


async def test_two_autoscalers_on_one_deployment_both_stop_until_one_goes(sim, fake):
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(1000)  # 500m per pod at 2 replicas: on target, stay at 2
    for name in ("web-a", "web-b"):
        sim.apply(autoscaler(name, "web", [pods_metric("http_requests", "500m")]))
    async with running(sim, settings()) as controller:
        for name in ("web-a", "web-b"):
            await eventually(lambda n=name: conditions(sim, n).get("ScalingActive") == ("False", "AmbiguousSelector"))
            active = next(c for c in status(sim, name)["conditions"] if c["type"] == "ScalingActive")
            assert active["message"] == MESSAGE
            await eventually(lambda n=name: set(events(sim, n)) >= BOTH)
        fake.pods[(NS, "http_requests")] = per_pod(2000)  # 1 per pod: either alone would go to 4
        await more_syncs(controller, 6)  # three more of each, at least
        assert replicas(sim, "web") == 2
        assert conditions(sim, "web-a")["ScalingActive"] == ("False", "AmbiguousSelector")
        sim.delete("promscaler.io/v1alpha1", "HorizontalAutoscaler", NS, "web-b")
        await eventually(lambda: replicas(sim, "web") == 4)
        await eventually(lambda: conditions(sim, "web-a").get("ScalingActive") == ("True", "ValidMetricFound"))


def test_a_shadowed_hpa_counts_hpas_only_and_a_forgotten_autoscaler_no_longer_counts():
    # kube-controller-manager, whose decisions a shadowed HPA predicts, knows no HorizontalAutoscaler;
    # a HorizontalAutoscaler counts every autoscaler on its pods. Unit-level: the selector store.
    from types import SimpleNamespace

    from autoscaler.controller.reconcile import CR, HPA, Reconciler
    from promscaler.selectors import parse_selector

    pod = SimpleNamespace(labels={"app": "web", "pod-template-hash": "7d4"})
    store = {(NS, "web-1"): pod, (NS, "web-2"): pod}
    r = Reconciler(kube=None, informers={}, pods=SimpleNamespace(informer=SimpleNamespace(store=store)),
                   pod_infos=None, scales=None, metrics=None, events=None,
                   observer=SimpleNamespace(forget=lambda key: None))
    web = parse_selector("app=web")
    ha, hpa = (CR, NS, "web-a"), (HPA, NS, "web-b")
    assert r._overlap(ha, "app=web", web, list(store), shadow=False).autoscalers == (f"{NS}/web-a",)
    assert r._overlap(hpa, "app=web", web, list(store), shadow=True).autoscalers == (f"{NS}/web-b",)
    assert r._overlap(ha, "app=web", web, list(store), shadow=False).autoscalers == (f"{NS}/web-a", f"{NS}/web-b")
    r.forget(hpa)
    assert r._overlap(ha, "app=web", web, list(store), shadow=False).autoscalers == (f"{NS}/web-a",)


async def test_two_shards_each_owning_one_of_two_autoscalers_on_the_same_pods_both_stop(sim, fake):
    # Kubernetes' one controller sees every HPA's selector; with sharding each replica syncs its own
    # share, and learns the others' selectors from their status (status.selector) in its cache.
    from autoscaler.controller.shards import owner

    members = ("r0", "r1")
    names = [f"web-{i}" for i in range(40)]
    first = next(n for n in names if owner(members, NS, n) == "r0")
    second = next(n for n in names if owner(members, NS, n) == "r1")
    both = " ".join(sorted(f"{NS}/{n}" for n in (first, second)))
    message = f"pods by selector app=web are controlled by multiple HPAs: [{both}]"
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(1000)  # 500m per pod at 2 replicas: on target, stay at 2
    for name in (first, second):
        sim.apply(autoscaler(name, "web", [pods_metric("http_requests", "500m")]))
    async with sharded(sim, members) as controllers:
        for name in (first, second):
            await eventually(lambda n=name: conditions(sim, n).get("ScalingActive") == ("False", "AmbiguousSelector"),
                             timeout=20)
            active = next(c for c in status(sim, name)["conditions"] if c["type"] == "ScalingActive")
            assert active["message"] == message
        assert controllers[0].owned == {("HorizontalAutoscaler", NS, first)}
        assert controllers[1].owned == {("HorizontalAutoscaler", NS, second)}
        fake.pods[(NS, "http_requests")] = per_pod(2000)  # 1 per pod: either alone would go to 4
        for c in controllers:
            await more_syncs(c, 3)
        assert replicas(sim, "web") == 2
        assert conditions(sim, first)["ScalingActive"] == ("False", "AmbiguousSelector")
