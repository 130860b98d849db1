"""The sandbox's control plane: a workload controller that keeps the pods of each Deployment,
ReplicaSet and StatefulSet at spec.replicas and their status current, and a minimal kubelet that
starts pods (phase Running, startTime) and makes them Ready after `ready_delay` seconds.

Runs as one asyncio task in the server's loop, driven by store watches (a dirty set, like a
workqueue), so a scale through `/scale` is acted on within one loop turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from typing import Any

from kubesim.cluster import NODE_NAME as NODE
from kubesim.cluster import Cluster
from kubesim.fields import Filter
from kubesim.resources import ResourceType
from kubesim.store import Watcher, copy, now, random_suffix
from promscaler.status import AlreadyExists, NotFound, StatusError

__all__ = ["WorkloadController", "pod_ready"]

Obj = dict[str, Any]
log = logging.getLogger(__name__)
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet")


def pod_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _owner(pod: Obj) -> Obj | None:
    for ref in pod["metadata"].get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") in WORKLOAD_KINDS:
            return ref
    return None


def _condition(kind: str, status: bool, at: str, reason: str = "", message: str = "") -> Obj:
    c: Obj = {"type": kind, "status": "True" if status else "False", "lastTransitionTime": at}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def _merge_conditions(old: list[Obj], new: list[Obj]) -> list[Obj]:
    """Keep lastTransitionTime of conditions whose status did not change."""
    before = {c.get("type"): c for c in old or ()}
    out = []
    for c in new:
        prev = before.get(c["type"])
        if prev is not None and prev.get("status") == c["status"] and "lastTransitionTime" in prev:
            c = {**c, "lastTransitionTime": prev["lastTransitionTime"]}
            for k in ("lastUpdateTime",):
                if k in prev:
                    c[k] = prev[k]
        out.append(c)
    return out


class WorkloadController:
    def __init__(self, cluster: Cluster, ready_delay: float = 1.0) -> None:
        self.cluster = cluster
        self.ready_delay = ready_delay
        self._pod_t = cluster.type("v1", "Pod")
        self._types = {k: cluster.type("apps/v1", k) for k in WORKLOAD_KINDS}
        self._dirty: set[tuple[str, str, str]] = set()  # (kind, namespace, name)
        self._owned: dict[str, set[tuple[str, str]]] = {}  # owner uid -> pods (namespace, name), from the pod watch
        self._wake = asyncio.Event()
        self._ips = itertools.count(2)
        self._watchers: list[Watcher] = []
        self._starting: dict[str, asyncio.TimerHandle | None] = {}  # uid of a pod this kubelet is making Ready

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        store = self.cluster.store
        for kind, t in self._types.items():
            self._watchers.append(store.watch(t, Filter(), None, loop, callback=self._on_workload(kind)))
        self._watchers.append(store.watch(self._pod_t, Filter(), None, loop, callback=self._on_pod))
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                dirty, self._dirty = self._dirty, set()
                for kind, ns, name in sorted(dirty):
                    try:
                        self.sync(kind, ns, name)
                    except (NotFound, AlreadyExists):  # raced with a delete or create; the watch brings us back
                        self._mark(kind, ns, name)
                    except StatusError as exc:  # e.g. an invalid pod template: report, keep the others going
                        log.warning("kubesim: cannot sync %s %s/%s: %s", kind, ns, name, exc.message)
                    await asyncio.sleep(0)
        finally:
            for w in self._watchers:
                store.unwatch(w)
            self._watchers.clear()
            for uid, handle in self._starting.items():  # rescheduled from the pod watch after a restart
                if handle is not None:
                    handle.cancel()
                self._starting[uid] = None

    def _mark(self, kind: str, ns: str, name: str) -> None:
        self._dirty.add((kind, ns, name))
        self._wake.set()

    def _on_workload(self, kind: str):
        def on_event(event: str, obj: Obj) -> None:
            if event != "DELETED":
                self._mark(kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        return on_event

    def _on_pod(self, event: str, pod: Obj) -> None:
        meta = pod["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if event == "ADDED" and not (pod.get("status") or {}).get("phase"):
            self._start_pod(*key)  # created through the API: the kubelet runs it
        elif event == "ADDED" and self._starting.get(meta["uid"], 0) is None:
            self._schedule_ready(pod)  # was starting when the server stopped
        elif event == "DELETED":
            handle = self._starting.pop(meta["uid"], None)
            if handle is not None:
                handle.cancel()
        ref = _owner(pod)
        if ref is not None:
            pods = self._owned.setdefault(ref["uid"], set())
            if event == "DELETED":
                pods.discard(key)
                if not pods:
                    del self._owned[ref["uid"]]
            else:
                pods.add(key)
            self._mark(ref["kind"], key[0], ref["name"])

    # --- kubelet ---------------------------------------------------------------------------

    def initial_status(self, spec: Obj) -> Obj:
        at, n = now(), next(self._ips)
        ready = self.ready_delay <= 0
        return {
            "phase": "Running",
            "startTime": at,
            "hostIP": "10.0.0.1",
            "podIP": f"10.244.{n // 250 % 250}.{n % 250 + 2}",
            "qosClass": "BestEffort",
            "conditions": [
                _condition("PodScheduled", True, at),
                _condition("Initialized", True, at),
                _condition("ContainersReady", ready, at),
                _condition("Ready", ready, at),
            ],
            "containerStatuses": [
                {
                    "name": c.get("name", ""),
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": ready,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": at}},
                }
                for c in spec.get("containers") or ()
            ],
        }

    def _start_pod(self, ns: str, name: str) -> None:
        def mutate(pod: Obj) -> None:
            if not (pod.get("status") or {}).get("phase"):
                pod.setdefault("spec", {}).setdefault("nodeName", NODE)
                pod["status"] = self.initial_status(pod.get("spec") or {})
        with contextlib.suppress(NotFound):
            pod = self.cluster.update_status(self._pod_t, ns, name, mutate)
            self._schedule_ready(pod)

    def _schedule_ready(self, pod: Obj) -> None:
        meta = pod["metadata"]
        if pod_ready(pod):
            self._starting.pop(meta["uid"], None)
            return

        def fire() -> None:
            self._starting.pop(meta["uid"], None)
            self._make_ready(meta.get("namespace", ""), meta["name"], meta["uid"])

        self._starting[meta["uid"]] = asyncio.get_running_loop().call_later(self.ready_delay, fire)

    def _make_ready(self, ns: str, name: str, uid: str) -> None:
        def mutate(pod: Obj) -> None:
            if pod["metadata"].get("uid") != uid:
                return
            at = now()
            st = pod.setdefault("status", {})
            st["conditions"] = [
                _condition(c["type"], True, at)
                if c.get("type") in ("Ready", "ContainersReady") and c.get("status") != "True"
                else c
                for c in st.get("conditions") or ()
            ]
            for cs in st.get("containerStatuses") or ():
                cs["ready"] = True
        with contextlib.suppress(NotFound):
            self.cluster.update_status(self._pod_t, ns, name, mutate)

    # --- workloads -------------------------------------------------------------------------

    def _owned_pods(self, uid: str) -> list[Obj]:
        pods = (self.cluster.store.get(self._pod_t, ns, name) for ns, name in sorted(self._owned.get(uid, ())))
        return [p for p in pods if p is not None and (_owner(p) or {}).get("uid") == uid]

    def sync(self, kind: str, ns: str, name: str) -> None:
        t = self._types[kind]
        obj = self.cluster.store.get(t, ns, name)
        if obj is None:
            return
        spec = obj.get("spec") or {}
        want = int(spec.get("replicas", 1) or 0)
        pods = self._owned_pods(obj["metadata"]["uid"])
        if len(pods) < want:
            taken = {p["metadata"]["name"] for p in pods}
            for _ in range(want - len(pods)):
                pods.append(self._create_pod(t, obj, taken))
        elif len(pods) > want:
            for pod in self._victims(kind, pods, len(pods) - want):
                with contextlib.suppress(NotFound):
                    self.cluster.delete(self._pod_t, ns, pod["metadata"]["name"])
                pods.remove(pod)
        self._write_status(t, obj, pods)

    def _victims(self, kind: str, pods: list[Obj], n: int) -> list[Obj]:
        """Which pods go on scale-down: highest ordinals for StatefulSets; otherwise not-ready
        first, then the newest (as the ReplicaSet controller ranks them)."""
        if kind == "StatefulSet":
            return sorted(pods, key=lambda p: int(p["metadata"]["name"].rsplit("-", 1)[-1]), reverse=True)[:n]
        return sorted(pods, key=lambda p: (not pod_ready(p), p["metadata"].get("creationTimestamp", ""),
                                           int(p["metadata"]["resourceVersion"])), reverse=True)[:n]

    def _create_pod(self, t: ResourceType, owner: Obj, taken: set[str]) -> Obj:
        meta, ns = owner["metadata"], owner["metadata"].get("namespace", "")
        template = (owner.get("spec") or {}).get("template") or {}
        tmeta = template.get("metadata") or {}
        while True:
            if t.kind == "StatefulSet":
                name = next(f"{meta['name']}-{i}" for i in itertools.count() if f"{meta['name']}-{i}" not in taken)
            else:
                name = f"{meta['name']}-{random_suffix()}"
            if name not in taken:
                break
        taken.add(name)
        pod_spec = copy(template.get("spec") or {"containers": []})
        pod_spec.setdefault("nodeName", NODE)
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": dict(tmeta.get("labels") or {}),
                         "ownerReferences": [{"apiVersion": t.api_version, "kind": t.kind, "name": meta["name"],
                                              "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "spec": pod_spec,
            "status": self.initial_status(pod_spec),
        }
        if tmeta.get("annotations"):
            pod["metadata"]["annotations"] = dict(tmeta["annotations"])
        created = self.cluster.create(self._pod_t, pod, keep_status=True)
        self._schedule_ready(created)
        return created

    def _write_status(self, t: ResourceType, obj: Obj, pods: list[Obj]) -> None:
        spec, old = obj.get("spec") or {}, obj.get("status") or {}
        want = int(spec.get("replicas", 1) or 0)
        ready = sum(1 for p in pods if pod_ready(p))
        status: Obj = {"observedGeneration": obj["metadata"].get("generation", 1), "replicas": len(pods),
                       "readyReplicas": ready, "availableReplicas": ready}
        if t.kind == "Deployment":
            at = now()
            status["updatedReplicas"] = len(pods)
            if len(pods) > ready:
                status["unavailableReplicas"] = len(pods) - ready
            available = ready >= want - want // 4
            status["conditions"] = _merge_conditions(
                old.get("conditions") or [],
                [
                    _condition(
                        "Available",
                        available,
                        at,
                        "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
                        "Deployment has minimum availability."
                        if available
                        else "Deployment does not have minimum availability.",
                    ),
                    _condition(
                        "Progressing",
                        True,
                        at,
                        "NewReplicaSetAvailable",
                        f'ReplicaSet "{obj["metadata"]["name"]}" has successfully progressed.',
                    ),
                ],
            )
        else:
            status["fullyLabeledReplicas" if t.kind == "ReplicaSet" else "currentReplicas"] = len(pods)
        if all(old.get(k) == v for k, v in status.items()) and set(old) <= set(status):
            return

        def mutate(cur: Obj) -> None:
            cur["status"] = status
        self.cluster.update_status(t, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], mutate)
