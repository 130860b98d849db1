"""The workload controller and kubelet stand-in, leases (the client's leader election) and
events, through the real clients."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kubernetes import client
from kubernetes.aio import client as aclient
from kubernetes.aio.leaderelection import electionconfig, leaderelection
from kubernetes.aio.leaderelection.resourcelock.leaselock import LeaseLock

from kubesim.apiserver import KubeSim
from kubesim.store import now

from ..support import eventually
from .kubesim_objects import deployment


def wait_for(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def ready(p: client.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or ())


def test_scale_creates_pods_that_become_ready(
    sim: KubeSim, ns: str, apps: client.AppsV1Api, core: client.CoreV1Api
) -> None:
    apps.create_namespaced_deployment(ns, deployment("web", replicas=1, labels={"app": "web"}))
    wait_for(lambda: len(core.list_namespaced_pod(ns, label_selector="app=web").items) == 1)
    apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 3}})
    wait_for(lambda: len(core.list_namespaced_pod(ns).items) == 3)
    pods = core.list_namespaced_pod(ns, label_selector="app=web").items
    dep = apps.read_namespaced_deployment("web", ns)
    for p in pods:
        assert p.metadata.name.startswith("web-") and len(p.metadata.name) == len("web-") + 5
        assert p.metadata.labels == {"app": "web"}
        assert p.metadata.owner_references[0].uid == dep.metadata.uid and p.metadata.owner_references[0].controller
        assert p.status.phase == "Running" and p.status.start_time is not None
        assert p.spec.containers[0].image == "example/app:1"
    wait_for(lambda: all(ready(p) for p in core.list_namespaced_pod(ns).items))  # ready_delay is 0.3 s
    for p in core.list_namespaced_pod(ns).items:
        cond = next(c for c in p.status.conditions if c.type == "Ready")
        assert cond.last_transition_time >= p.status.start_time
    wait_for(lambda: (apps.read_namespaced_deployment_status("web", ns).status.ready_replicas or 0) == 3)
    st = apps.read_namespaced_deployment_status("web", ns).status
    assert (st.replicas, st.available_replicas, st.observed_generation) == (3, 3, 2)
    assert apps.read_namespaced_deployment_scale("web", ns).status.replicas == 3


def test_pods_are_not_ready_before_the_delay(ns: str) -> None:
    with KubeSim(ready_delay=30) as slow:
        slow.apply(deployment("web", replicas=2, namespace=ns))
        wait_for(lambda: len(slow.list("v1", "Pod", ns)) == 2)
        wait_for(lambda: (slow.get("apps/v1", "Deployment", ns, "web").get("status") or {}).get("replicas") == 2)
        pods = slow.list("v1", "Pod", ns)
        assert all(p["status"]["phase"] == "Running" for p in pods)
        assert not any(c["type"] == "Ready" and c["status"] == "True" for p in pods for c in p["status"]["conditions"])
        assert slow.get("apps/v1", "Deployment", ns, "web")["status"]["readyReplicas"] == 0


def test_scale_down_deletes_the_newest_pods(sim: KubeSim, ns: str, apps: client.AppsV1Api) -> None:
    sim.apply(deployment("web", replicas=2, namespace=ns))
    wait_for(lambda: len(sim.list("v1", "Pod", ns)) == 2)
    oldest = {p["metadata"]["name"] for p in sim.list("v1", "Pod", ns)}
    newest_stamp = max(p["metadata"]["creationTimestamp"] for p in sim.list("v1", "Pod", ns))
    wait_for(lambda: now() > newest_stamp)  # creationTimestamp has seconds precision: new pods must be younger
    apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 4}})
    wait_for(lambda: len(sim.list("v1", "Pod", ns)) == 4)
    apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 2}})
    wait_for(lambda: len(sim.list("v1", "Pod", ns)) == 2)
    assert {p["metadata"]["name"] for p in sim.list("v1", "Pod", ns)} == oldest
    apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 0}})
    wait_for(lambda: sim.list("v1", "Pod", ns) == [])
    wait_for(lambda: sim.get("apps/v1", "Deployment", ns, "web")["status"]["replicas"] == 0)


def test_deleted_pod_is_replaced(sim: KubeSim, ns: str, core: client.CoreV1Api) -> None:
    sim.apply(deployment("web", replicas=2, namespace=ns))
    wait_for(lambda: len(sim.list("v1", "Pod", ns)) == 2)
    victim = sim.list("v1", "Pod", ns)[0]["metadata"]["name"]
    core.delete_namespaced_pod(victim, ns)
    wait_for(
        lambda: (
            len(sim.list("v1", "Pod", ns)) == 2
            and victim not in {p["metadata"]["name"] for p in sim.list("v1", "Pod", ns)}
        )
    )


def test_statefulset_pods_have_ordinals(sim: KubeSim, ns: str) -> None:
    sts = deployment("db", replicas=3, namespace=ns) | {"kind": "StatefulSet"}
    sim.apply(sts)
    wait_for(lambda: len(sim.list("v1", "Pod", ns)) == 3)
    assert sorted(p["metadata"]["name"] for p in sim.list("v1", "Pod", ns)) == ["db-0", "db-1", "db-2"]
    sim.apply(sts | {"spec": {**sts["spec"], "replicas": 1}})
    wait_for(lambda: [p["metadata"]["name"] for p in sim.list("v1", "Pod", ns)] == ["db-0"])


def test_pod_created_through_the_api_is_started(sim: KubeSim, ns: str, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(
        ns, {"metadata": {"name": "solo"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    wait_for(lambda: ready(core.read_namespaced_pod("solo", ns)))
    assert core.read_namespaced_pod("solo", ns).status.phase == "Running"


def test_subscribe_sees_pods_come_and_go(sim: KubeSim, ns: str) -> None:
    seen: list[tuple[str, str]] = []
    witness: list[tuple[str, str]] = []  # subscribed throughout: what `seen` would have got
    unsubscribe = sim.subscribe(
        "v1", "Pod", lambda kind, obj: seen.append((kind, obj["metadata"]["name"])), namespace=ns
    )
    unsubscribe_witness = sim.subscribe("v1", "Pod", lambda kind, obj: witness.append((kind, obj["metadata"]["name"])),
                                        namespace=ns)
    sim.apply(deployment("web", replicas=1, namespace=ns))
    wait_for(lambda: any(k == "ADDED" for k, _ in seen))
    name = next(n for k, n in seen if k == "ADDED")
    sim.delete("apps/v1", "Deployment", ns, "web")
    wait_for(lambda: ("DELETED", name) in seen)
    unsubscribe()
    before = list(seen)
    sim.apply(deployment("web2", replicas=1, namespace=ns))
    wait_for(lambda: any(k == "ADDED" and n != name for k, n in witness))
    later = next(n for k, n in witness if k == "ADDED" and n != name)
    sim.delete("apps/v1", "Deployment", ns, "web2")
    # each change is handed to every subscriber in the server's loop before the next change is:
    # once the witness has the pod's deletion, `seen` has had every event it could be given
    wait_for(lambda: ("DELETED", later) in witness)
    unsubscribe_witness()
    assert seen == before == witness[:len(before)]


def test_events(ns: str, core: client.CoreV1Api) -> None:
    for obj in ("web", "other"):
        core.create_namespaced_event(ns, {
            "metadata": {"generateName": f"{obj}."},
            "involvedObject": {"apiVersion": "promscaler.io/v1alpha1", "kind": "HorizontalAutoscaler", "name": obj,
                               "namespace": ns},
            "reason": "SuccessfulRescale", "message": "New size: 3; reason: pods metric above target",
            "type": "Normal", "source": {"component": "promscaler"}, "count": 1,
        })
    events = core.list_namespaced_event(ns, field_selector="involvedObject.name=web").items
    assert [(e.involved_object.name, e.reason) for e in events] == [("web", "SuccessfulRescale")]


class FixedLeaseLock(LeaseLock):
    """kubernetes 37's aio LeaseLock.create passes pretty=True, which its own pydantic
    validation rejects; same request without it."""

    async def create(self, name, namespace, election_record) -> bool:
        body = aclient.V1Lease(metadata=aclient.V1ObjectMeta(name=name), spec=self.update_lease(election_record))
        try:
            await self.api_instance.create_namespaced_lease(namespace, body)
            return True
        except aclient.exceptions.ApiException:
            return False


async def test_leader_election_with_leases(sim: KubeSim, ns: str) -> None:
    async with aclient.ApiClient(sim.aio_client_configuration()) as api:
        leading: list[str] = []

        def candidate(identity: str) -> leaderelection.LeaderElection:
            async def lead() -> None:
                leading.append(identity)
                await asyncio.Event().wait()

            async def stopped() -> None:
                pass

            lock = FixedLeaseLock("promscaler", ns, identity, api)
            return leaderelection.LeaderElection(electionconfig.Config(
                lock, lease_duration=2, renew_deadline=1.5, retry_period=1, onstarted_leading=lead,
                onstopped_leading=stopped))

        first = asyncio.create_task(candidate("a").run())
        await eventually(lambda: leading == ["a"])
        second = asyncio.create_task(candidate("b").run())
        leases = aclient.CoordinationV1Api(api)

        async def renewed_past_a_lease_duration() -> bool:
            spec = (await leases.read_namespaced_lease("promscaler", ns)).spec
            if spec is None or spec.renew_time is None or spec.acquire_time is None or not spec.lease_duration_seconds:
                return False
            return (spec.renew_time - spec.acquire_time).total_seconds() > spec.lease_duration_seconds

        # longer than the lease while "b" tries: "a" keeps renewing it
        for _ in range(100):
            if await renewed_past_a_lease_duration():
                break
            await asyncio.sleep(0.1)
        assert await renewed_past_a_lease_duration()
        assert leading == ["a"]
        lease = await leases.read_namespaced_lease("promscaler", ns)
        assert lease.spec.holder_identity == "a"
        first.cancel()  # the leader dies without releasing
        for _ in range(100):
            if leading == ["a", "b"]:
                break
            await asyncio.sleep(0.1)
        assert leading == ["a", "b"]
        lease = await aclient.CoordinationV1Api(api).read_namespaced_lease("promscaler", ns)
        assert lease.spec.holder_identity == "b"
        second.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
