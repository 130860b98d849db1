"""The controller loop: informers -> work queue -> N workers -> reconcile, behind leader election
or sharding.

The loop follows the cluster's Kubernetes release (releases.py). From 1.37 an autoscaler is synced
as soon as it appears or its spec changes; before, those waited out a sync period, as the HPA
controller's rate-limited queue made them. Either way it is synced again every sync period (the HPA
controller re-queues each key after the resync period), and from 1.37 a sync waits until the
informer has seen the controller's own last status write. Failed syncs are retried with per-key
exponential backoff, never later than one sync period. With leader election only the leader syncs
(and so only the leader writes); standbys keep their caches warm. With sharding every replica syncs
the objects it owns (shards.py); the others are left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import uvicorn

from autoscaler.decision.controls import PAUSED_ANNOTATION, PAUSED_REPLICAS_ANNOTATION
from autoscaler.decision.kubeversion import KubeVersion
from autoscaler.decision.model import ControllerConfig
from promscaler.kubeapi import Kube, Obj
from promscaler.logs import vlog

from .apihealth import ApiHealth, describe, is_outage
from .events import EventRecorder
from .http import Telemetry, create_app
from .informers import CachedAutoscaler, Informer, PodIndex, as_object, cached_autoscaler, cached_pod, key_of
from .leader import LeaderElector
from .metrics import MetricsClient
from .queue import ShutDown, WorkQueue
from .reconcile import CR, HPA, Reconciler, StaleCache, SyncError, WorkKey
from .releases import cluster_release
from .scale import Discovery, ScaleClient
from .shadow import ShadowBook
from .shards import Membership, owner
from .stopping import sleep_or_stop

log = logging.getLogger(__name__)

CRD_ABSENT = ("the HorizontalAutoscaler CRD (promscaler.io/v1alpha1) is not installed: reconciling native HPAs only; "
              "HorizontalAutoscalers are picked up when it is installed")
CRD_ABSENT_ONLY = ("the HorizontalAutoscaler CRD (promscaler.io/v1alpha1) is not installed and "
                   "--reconcile-native-hpas is off: nothing to reconcile until the CRD is installed")


@dataclass(frozen=True)
class Settings:
    """Everything `autoscaler run` can be told; flag names in cli.py."""

    sync_period: float = 15.0
    workers: int = 20
    config: ControllerConfig = field(default_factory=ControllerConfig)
    kube_version: KubeVersion | None = None  # --kubernetes-version; None: the cluster's own (/version)
    dry_run: bool = False
    reconcile_native_hpas: bool = False
    namespace: str | None = None
    leader_elect: bool = True
    sharding: bool = False  # exclusive with leader_elect; lease timings and name shared
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    lease_name: str = "promscaler-autoscaler"
    lease_namespace: str = "kube-system"
    identity: str = field(default_factory=lambda: f"{os.uname().nodename}_{uuid.uuid4()}")
    http_host: str = "0.0.0.0"
    http_port: int | None = 8080
    kube_api_qps: float = 500.0
    kube_api_burst: int = 1000
    watch_timeout: float = 300.0
    shutdown_grace: float = 20.0


def _path(group_version: str, resource: str, namespace: str | None) -> str:
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    return f"{root}/namespaces/{namespace}/{resource}" if namespace else f"{root}/{resource}"


def _pause_changed(old: Obj | None, new: Obj | None) -> bool:
    """A pause annotation of an existing autoscaler changed (it changes no generation; docs/controls.md)."""
    if old is None or new is None:
        return False
    oa = (old.get("metadata") or {}).get("annotations") or {}
    na = (new.get("metadata") or {}).get("annotations") or {}
    return any(oa.get(k) != na.get(k) for k in (PAUSED_ANNOTATION, PAUSED_REPLICAS_ANNOTATION))


def _spec_changed(old: Obj | None, new: Obj | None) -> bool:
    """A change that asks for a sync: a new autoscaler, its spec (its generation; the spec itself
    where the API server keeps none), or a pause annotation."""
    if old is None or new is None or _pause_changed(old, new):
        return True
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    if om.get("generation") is not None and nm.get("generation") is not None:
        return om.get("generation") != nm.get("generation")
    return old.get("spec") != new.get("spec")


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the controller owns SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def install_signal_handlers(self) -> None:
        pass


class Controller:
    def __init__(self, kube: Kube, settings: Settings) -> None:
        self.kube, self.settings = kube, settings
        s = settings
        kube.rate_limit(s.kube_api_qps, s.kube_api_burst)
        if s.sharding and s.leader_elect:
            raise ValueError("sharding and leader election are mutually exclusive")
        self.telemetry = Telemetry(shadow=s.dry_run, sharding=s.sharding)
        self.health = ApiHealth(kube)
        self.queue: WorkQueue[WorkKey] = WorkQueue(max_delay=s.sync_period, metrics=self.telemetry)
        self.informers: dict[str, Informer] = {
            CR: Informer(kube, _path("promscaler.io/v1alpha1", "horizontalautoscalers", s.namespace),
                         name="horizontalautoscalers", watch_timeout=s.watch_timeout, health=self.health,
                         project=cached_autoscaler,
                         absent=CRD_ABSENT if s.reconcile_native_hpas else CRD_ABSENT_ONLY),
        }
        if s.reconcile_native_hpas:
            self.informers[HPA] = Informer(kube, _path("autoscaling/v2", "horizontalpodautoscalers", s.namespace),
                                           name="horizontalpodautoscalers", watch_timeout=s.watch_timeout,
                                           health=self.health, project=cached_autoscaler)
        self.pod_informer = Informer(kube, _path("v1", "pods", s.namespace), name="pods", watch_timeout=s.watch_timeout,
                                     project=cached_pod, health=self.health)
        self.pods = PodIndex(self.pod_informer)
        discovery = Discovery(kube)
        self.shadow: ShadowBook | None = None
        if s.dry_run and s.reconcile_native_hpas:
            self.shadow = ShadowBook(self.telemetry.registry, sync_period=s.sync_period,
                                     on_compared=self.telemetry.shadow)
        self.reconciler = Reconciler(
            kube=kube, informers=self.informers, pods=self.pods, pod_infos=self.pods.info,
            scales=ScaleClient(kube, discovery), metrics=MetricsClient(kube, discovery), events=EventRecorder(kube),
            observer=self.telemetry, config=s.config, dry_run=s.dry_run, shadow_book=self.shadow)
        for kind, informer in self.informers.items():
            informer.add_handler(self._handler(kind))
            self.telemetry.stale_skips.labels(kind)  # a sample from the start, to alert on its rate
        self.elector: LeaderElector | None = None
        if s.leader_elect:
            self.elector = LeaderElector(kube, namespace=s.lease_namespace, name=s.lease_name, identity=s.identity,
                                         lease_duration=s.lease_duration, renew_deadline=s.renew_deadline,
                                         retry_period=s.retry_period, on_change=self._leadership,
                                         health=self.health)
        self.members: Membership | None = None
        if s.sharding:
            self.members = Membership(kube, namespace=s.lease_namespace, group=s.lease_name, identity=s.identity,
                                      lease_duration=s.lease_duration, renew_deadline=s.renew_deadline,
                                      retry_period=s.retry_period, drain=self._drain, on_change=self._reshard,
                                      health=self.health, watch_timeout=s.watch_timeout)
        self.owned: set[WorkKey] = set()  # sharding: the objects this replica acts on now
        if self.members is not None:  # every family has a sample from the start
            for kind in self.informers:
                self.telemetry.shard_owned.labels(kind).set(0)
            for direction in ("gained", "lost"):
                self.telemetry.shard_handovers.labels(direction)
        self._leading = asyncio.Event()
        if self.elector is None and self.members is None:
            self._leading.set()
            self.telemetry.leader.set(1)
        self._inflight: dict[WorkKey, asyncio.Task[None]] = {}
        self.syncs = 0
        self.http_port: int | None = None

    # --- wiring ------------------------------------------------------------------------------

    def _handler(self, kind: str) -> Callable[[str, CachedAutoscaler | None, CachedAutoscaler | None], None]:
        def on_event(event: str, cached_old: CachedAutoscaler | None, cached_new: CachedAutoscaler | None) -> None:
            old, new = as_object(cached_old), as_object(cached_new)
            ns, name = key_of(new or old or {})
            key = (kind, ns, name)
            if self.shadow is not None and kind == HPA:
                self.shadow.observe(key, old, new)
            if self.members is not None and new is not None:  # sharding: other shards' selectors too
                self.reconciler.observe_selector(key, new)
            if event == "DELETED":
                self.queue.cancel(key)
                self.reconciler.forget(key)
                self._own(key, False)
            elif _spec_changed(old, new):
                if old is None and self.members is not None:
                    self._own(key, self.members.owns(ns, name))
                if self.reconciler.config.features.reconcile_at_once or _pause_changed(old, new):
                    self.queue.add(key)
                else:  # before 1.37 an add or update waited a resync period; an earlier pending sync wins
                    self.queue.add_after(key, self.settings.sync_period)
        return on_event

    @property
    def release(self) -> KubeVersion:
        """The Kubernetes release the loop and its decisions follow."""
        return self.reconciler.config.kube_version

    def _follow(self, release: KubeVersion) -> None:
        self.reconciler.config = replace(self.reconciler.config, kube_version=release)
        log.info("following the HPA controller of Kubernetes %s", release, extra={"kube_version": str(release)})

    def _leadership(self, leading: bool) -> None:
        self.telemetry.leader.set(1 if leading else 0)
        if leading:
            self._leading.set()
            for kind, informer in self.informers.items():  # a new leader syncs everything now
                for ns, name in list(informer.store):
                    self.queue.add((kind, ns, name))
        else:
            self._leading.clear()

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    def acts_on(self, key: WorkKey) -> bool:
        """Whether this replica may sync (and so write) `key` now."""
        if self.members is not None:
            return self.members.owns(key[1], key[2])
        return self.is_leader

    def _own(self, key: WorkKey, owned: bool) -> None:
        if self.members is None or owned == (key in self.owned):
            return
        if owned:
            self.owned.add(key)
        else:
            self.owned.discard(key)
        self.telemetry.shard_owned.labels(key[0]).inc(1 if owned else -1)

    def _reshard(self) -> None:
        """The membership (or whether we may act) changed: sync what we gained now, forget what we lost."""
        assert self.members is not None
        active, view = self.members.active(), self.members.view()
        me = self.settings.identity
        owned = {(kind, ns, name) for kind, informer in self.informers.items() for ns, name in informer.store
                 if owner(view, ns, name) == me} if active else set()
        gained, lost = owned - self.owned, self.owned - owned
        for key in lost:
            self.queue.cancel(key)
            if owner(view, key[1], key[2]) != me:  # another's now; a pause (not renewed) keeps the history
                self.reconciler.forget(key, deleted=False)
            self._own(key, False)
        for key in gained:
            self._own(key, True)
            self.queue.add(key)
        if gained or lost:
            log.info("shard membership changed: %d members, owning %d objects (%d gained, %d lost)",
                     len(view), len(self.owned), len(gained), len(lost))
        self.telemetry.shard_handovers.labels("gained").inc(len(gained))
        self.telemetry.shard_handovers.labels("lost").inc(len(lost))
        self.telemetry.shard_active.set(1 if active else 0)
        self.telemetry.shard_member.clear()
        for identity in view:
            self.telemetry.shard_member.labels(identity).set(1)
        if active:
            self._leading.set()
        else:
            self._leading.clear()

    async def _drain(self) -> None:
        """Wait for the in-flight syncs of objects we no longer own under the current view."""
        assert self.members is not None
        me = self.settings.identity
        while True:
            view = self.members.view()
            lost = [t for key, t in self._inflight.items() if owner(view, key[1], key[2]) != me]
            if not lost:
                return
            await asyncio.wait(lost)

    def ready(self) -> bool:
        return self.pod_informer.synced.is_set() and all(i.synced.is_set() for i in self.informers.values())

    def _refresh_gauges(self) -> None:
        self.telemetry.depth(len(self.queue))

    # --- workers -----------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            await self._leading.wait()
            await self.health.wait_up()
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            if not self.acts_on(key) or not self.health.up.is_set():
                self.queue.done(key)
                if self.members is None or not self.health.up.is_set():
                    self.queue.add(key)
                elif owner(self.members.view(), key[1], key[2]) == self.settings.identity:
                    # ours, but we may not act this moment (a late renewal): again once we may
                    self.queue.add_after(key, self.settings.retry_period)
                # else another replica's: _reshard adds what we gain
                continue
            task = asyncio.create_task(self._process(key))
            self._inflight[key] = task
            task.add_done_callback(functools.partial(self._finished, key))
            await asyncio.shield(task)

    def _finished(self, key: WorkKey, _task: asyncio.Task[None]) -> None:
        self._inflight.pop(key, None)

    async def _process(self, key: WorkKey) -> None:
        try:
            await self.reconciler.sync(key)
            self.queue.forget(key)
            book = self.shadow if key[0] == HPA else None  # a shadowed HPA syncs just before the real one
            self.queue.add_after(key, book.next_delay(key) if book is not None else self.settings.sync_period)
        except StaleCache as exc:  # not a failure: the next period's sync reads our write
            vlog(log, 2, "sync of %s %s/%s deferred: %s", *key, exc,
                 extra={"kind": key[0], "namespace": key[1], "autoscaler": key[2]})
            self.telemetry.stale_skips.labels(key[0]).inc()
            self.queue.add_after(key, self.settings.sync_period)
        except SyncError as exc:
            # the reconciler logged the failure itself (rate-limited); here only the retry
            vlog(log, 2, "sync of %s %s/%s failed, retrying with backoff: %s", *key, exc,
                 extra={"kind": key[0], "namespace": key[1], "autoscaler": key[2], "retries": self.queue.failures(key)})
            self.queue.add_rate_limited(key)
        except Exception as exc:
            if is_outage(exc):  # the API server is gone: one shared warning and retry loop, then a fresh sync
                self.health.failed(exc)
                log.debug("sync of %s %s/%s interrupted: %s", *key, describe(exc))
                self.queue.add(key)
            else:
                log.exception("sync of %s %s/%s crashed", *key)
                self.queue.add_rate_limited(key)
        finally:
            self.syncs += 1
            self.queue.done(key)

    # --- lifecycle ---------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set, then finish in-flight syncs and release the lease."""
        s = self.settings
        release = s.kube_version or await cluster_release(self.kube, self.health, stop)
        if release is None:  # stopped while the API server was away
            await self.health.close()
            return
        self._follow(release)
        inf_stop, lead_stop = asyncio.Event(), asyncio.Event()
        informer_tasks = [asyncio.create_task(i.run(inf_stop)) for i in (*self.informers.values(), self.pod_informer)]
        server, server_task = None, None
        if s.http_port is not None:
            app = create_app(self.telemetry, self.ready, self._refresh_gauges,
                             shadow=self.shadow.summary if self.shadow else None)
            server = _Server(
                uvicorn.Config(
                    app, host=s.http_host, port=s.http_port, log_level="warning", lifespan="off", access_log=False
                )
            )
            server_task = asyncio.create_task(server.serve())
        log.info("controller starting", extra={"dry_run": s.dry_run, "native_hpas": s.reconcile_native_hpas,
                                                "namespace": s.namespace or "*"})
        while not self.ready() and not await sleep_or_stop(stop, 0.05):
            pass
        if server is not None and server_task is not None:
            while not server.started and not server_task.done() and not await sleep_or_stop(stop, 0.02):
                pass
            if server.servers:
                self.http_port = server.servers[0].sockets[0].getsockname()[1]
        workers = [asyncio.create_task(self._worker()) for _ in range(s.workers)]
        elector_task = (asyncio.create_task(self.elector.run(lead_stop)) if self.elector
                        else asyncio.create_task(self.members.run(lead_stop)) if self.members else None)
        children = [
            *informer_tasks,
            *workers,
            *([elector_task] if elector_task else []),
            *([server_task] if server_task else []),
        ]
        try:
            await stop.wait()
            log.info("stopping: finishing in-flight syncs")
            await self.queue.shut_down()
            for w in workers:
                w.cancel()
            if self._inflight:
                await asyncio.wait(list(self._inflight.values()), timeout=s.shutdown_grace)
            lead_stop.set()
            if elector_task is not None:
                await elector_task
            inf_stop.set()
            for t in informer_tasks:
                t.cancel()
            if server is not None:
                server.should_exit = True
            await asyncio.gather(*children, return_exceptions=True)
            await self.health.close()
        finally:  # cancelled (not stopped): take every child down with us
            for t in [*children, *self._inflight.values()]:
                t.cancel()
        log.info("controller stopped")
