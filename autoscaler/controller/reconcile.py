"""One sync of one autoscaler: read the world, decide, write scale, status and events.

The order and the reasons are the Kubernetes HPA controller's (`reconcileAutoscaler`): read the
target's scale, select its pods from the cache, fetch every metric, decide, write `/scale`
(unless dry-run), remember the scale event, then write status through the status subresource.

Memory per autoscaler (recommendations, scale events) lives here, in process, as in Kubernetes.
After a (re)start the first sync passes an empty History: the engine then seeds it with the
current replica count at `now`, so the downscale stabilization window holds the current size and
a restart cannot cause a scale-down burst; `status.lastScaleTime` is carried over unchanged.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from autoscaler.decision import decide, record_scale
from autoscaler.decision.conditions import SCALED_TO_ZERO
from autoscaler.decision.controls import failures_so_far, parse_pause
from autoscaler.decision.model import (
    Condition,
    ControllerConfig,
    Decision,
    DecisionInput,
    History,
    Pause,
    PodInfo,
    SelectorOverlap,
)
from autoscaler.decision.overlap import selecting
from autoscaler.decision.spec import HPASpec, SpecError, parse_spec
from promscaler.kubeapi import ApiError, Kube, Obj
from promscaler.logs import RepeatLimiter
from promscaler.selectors import Selector, SelectorError, parse_selector

from .events import EventRecorder
from .informers import Informer, PodIndex, as_object
from .metrics import MetricsClient
from .scale import ScaleClient, ScaleError
from .shadow import ShadowBook
from .status import build_status, replace_condition, with_summary, without

log = logging.getLogger(__name__)

CR = "HorizontalAutoscaler"
HPA = "HorizontalPodAutoscaler"
PATHS = {
    CR: "/apis/promscaler.io/v1alpha1/namespaces/{ns}/horizontalautoscalers/{name}",
    HPA: "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers/{name}",
}
WorkKey = tuple[str, str, str]  # (kind, namespace, name)

FAILED_GET = {
    "Resource": "FailedGetResourceMetric",
    "ContainerResource": "FailedGetContainerResourceMetric",
    "Pods": "FailedGetPodsMetric",
    "Object": "FailedGetObjectMetric",
    "External": "FailedGetExternalMetric",
}


def _target(ns: str, ref: Obj) -> str:
    """`Deployment demo/web`: the scale target as a log line names it."""
    return f"{ref.get('kind', 'target')} {ns}/{ref.get('name', '')}"


class SyncError(Exception):
    """The sync failed in a way worth retrying with backoff (scale or status not readable/writable)."""


class StaleCache(Exception):
    """The informer has not yet seen this controller's last status write of the autoscaler: the sync
    is deferred to the next period, not failed (Kubernetes 1.37, kubernetes#139025)."""


class Observer(Protocol):
    def synced(self, key: WorkKey, seconds: float, error: str | None) -> None: ...
    def replicas(self, key: WorkKey, current: int, desired: int) -> None: ...
    def shadow(self, key: WorkKey, ours: int, cluster: int | None) -> None: ...
    def forget(self, key: WorkKey) -> None: ...
    def status(self, key: WorkKey, spec: Obj, status: Obj) -> None: ...


@dataclass
class Reconciler:
    kube: Kube
    informers: dict[str, Informer]
    pods: PodIndex
    pod_infos: Callable[[tuple[str, str]], PodInfo | None]
    scales: ScaleClient
    metrics: MetricsClient
    events: EventRecorder
    observer: Observer
    config: ControllerConfig = field(default_factory=ControllerConfig)
    dry_run: bool = False
    status_retries: int = 5
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    shadow_book: ShadowBook | None = None  # shadow mode: the real HPAs' history and the comparison

    repeats: RepeatLimiter = field(default_factory=RepeatLimiter)  # a failure each sync: logged once a minute

    def __post_init__(self) -> None:
        self.histories: dict[WorkKey, History] = {}
        # the parsed spec per generation: parsed once, so the schedules' windows (computed from
        # their cron expressions and kept on the parsed spec) are not recomputed every sync
        self.specs: dict[WorkKey, tuple[int, HPASpec]] = {}
        # each autoscaler's selector at its last sync, by namespace (kube-controller-manager's
        # selector store): who else selects an autoscaler's pods (AmbiguousSelector)
        self.selectors: dict[str, dict[WorkKey, Selector]] = {}
        # the resourceVersion of each autoscaler's last status write: its next sync waits for the
        # informer to have seen it (the HPA controller's ConsistencyStore, WroteAt / EnsureReady)
        self.written: dict[WorkKey, str] = {}

    def parsed_spec(self, key: WorkKey, obj: Obj) -> HPASpec:
        generation = (obj.get("metadata") or {}).get("generation")
        kept = self.specs.get(key)
        if kept is not None and kept[0] == generation:
            return kept[1]
        spec = parse_spec(obj.get("spec") or {}, "spec")
        if isinstance(generation, int):
            self.specs[key] = (generation, spec)
        return spec

    def warn(self, key: WorkKey, reason: str, message: str) -> None:
        """Log a sync failure: the first time, then at most once per minute with how often it recurred
        (each occurrence is still an Event)."""
        suppressed = self.repeats.check(key, f"{reason}: {message}")
        if suppressed is None:
            return
        kind, ns, name = key
        again = f" (occurred {suppressed} more times since last logged)" if suppressed else ""
        log.warning("%s %s/%s: %s: %s%s", kind, ns, name, reason, message, again,
                    extra={"kind": kind, "namespace": ns, "autoscaler": name, "reason": reason,
                           "repeated": suppressed})

    def forget(self, key: WorkKey, deleted: bool = True) -> None:
        """Drop what this replica remembers of syncing `key`; its selector too once it is `deleted`
        (another shard's autoscaler still selects its pods)."""
        self.histories.pop(key, None)
        if deleted:
            self.selectors.get(key[1], {}).pop(key, None)
        self.specs.pop(key, None)
        self.written.pop(key, None)
        self.observer.forget(key)
        if self.shadow_book is not None:
            self.shadow_book.forget(key)

    def observe_selector(self, key: WorkKey, obj: Obj | None) -> None:
        """Learn a HorizontalAutoscaler's selector from its status (`status.selector`, written by the
        replica that synced it): with sharding, every replica's selector store then holds every
        autoscaler's, as kube-controller-manager's single one does, at no extra API call."""
        text = ((obj or {}).get("status") or {}).get("selector")
        if key[0] != CR or not isinstance(text, str) or not text:
            return
        try:
            selector = _parsed(text)
        except SelectorError:
            return
        self.selectors.setdefault(key[1], {})[key] = selector

    def ensure_seen(self, key: WorkKey) -> None:
        """StaleCache while the informer's last synced resourceVersion is behind our last status write
        of `key` (recorded from 1.37 on); once it has caught up the write is forgotten."""
        written = self.written.get(key)
        if written is None:
            return
        seen = self.informers[key[0]].resource_version
        if not _caught_up(seen, written):
            raise StaleCache(f"the cache is at resourceVersion {seen or '(none)'}, "
                             f"before our status write at {written}")
        del self.written[key]

    def observed_generation(self, obj: Obj) -> int | None:
        """The generation a status write says it observed: from Kubernetes 1.37 on, else None (none written)."""
        return _generation(obj) if self.config.features.generations else None

    async def sync(self, key: WorkKey) -> Decision | None:
        """Reconcile one autoscaler; raises SyncError when it should be retried with backoff,
        StaleCache when the informer has not seen our last status write yet."""
        self.ensure_seen(key)
        started, error = time.perf_counter(), None
        try:
            return await self._sync(key)
        except SyncError as exc:
            error = str(exc)
            raise
        finally:
            self.observer.synced(key, time.perf_counter() - started, error)

    async def _sync(self, key: WorkKey) -> Decision | None:
        kind, ns, name = key
        obj = as_object(self.informers[kind].get((ns, name)))
        if obj is None:
            self.forget(key)
            return None
        obj = {"apiVersion": "promscaler.io/v1alpha1" if kind == CR else "autoscaling/v2", "kind": kind, **obj}
        shadow = kind == HPA and self.dry_run  # native HPA in shadow mode: write nothing at all
        synced = now = self.clock()
        book = self.shadow_book if shadow else None
        if book is not None:  # decide as of the real HPA's sync this one shadows
            now = book.decision_time(key, now)
        spec_dict = obj.get("spec") or {}
        prev_status = obj.get("status") or {}

        async def fail(reason: str, message: str, condition: Condition, *, retry: bool) -> None:
            self.warn(key, reason, message)  # logged before the writes, so the log never trails the Events
            if not shadow:
                await self._event(obj, "Warning", reason, message, now)
                current = int(prev_status.get("currentReplicas") or 0)
                status = build_status(prev_status, generation=self.observed_generation(obj), current_replicas=current,
                                      desired_replicas=int(prev_status.get("desiredReplicas") or current),
                                      current_metrics=prev_status.get("currentMetrics"),
                                      conditions=[condition],
                                      last_scale_time=None, now=now, decided=False)
                # no decision this sync: the controls' state (the fallback's count of failed syncs) stays
                status.update({k: prev_status[k] for k in ("control", "metricFailures") if k in prev_status})
                await self._write_status(kind, obj, status)
            if retry:
                raise SyncError(f"{reason}: {message}")

        try:
            spec = self.parsed_spec(key, obj)
            paused = _pause(kind, obj)
        except SpecError as exc:
            await fail(
                "InvalidSpec",
                str(exc),
                Condition("ScalingActive", "False", "InvalidSpec", f"the spec is invalid: {exc}"),
                retry=False,
            )
            return None
        target = spec_dict.get("scaleTargetRef") or {}
        try:
            scale = await self.scales.get(ns, target)
        except ScaleError as exc:
            msg = f"the HPA controller was unable to get the target's current scale: {exc}"
            await fail("FailedGetScale", str(exc), Condition("AbleToScale", "False", "FailedGetScale", msg), retry=True)
            return None
        if not scale.selector:
            msg = "the HPA target's scale is missing a selector"
            await fail(
                "SelectorRequired",
                "selector is required",
                Condition("ScalingActive", "False", "InvalidSelector", msg),
                retry=False,
            )
            return None
        try:
            selector = _parsed(scale.selector)
        except SelectorError as exc:
            await fail(
                "InvalidSelector",
                f"couldn't convert selector into a corresponding internal selector object: {exc}",
                Condition(
                    "ScalingActive",
                    "False",
                    "InvalidSelector",
                    f"the HPA target's scale has an invalid selector: {exc}",
                ),
                retry=False,
            )
            return None

        pod_keys = self.pods.select(ns, selector)
        pods = [info for info in map(self.pod_infos, pod_keys) if info is not None]
        found = self._overlap(key, scale.selector, selector, pod_keys, shadow)
        if paused is None:
            readings = await self.metrics.read_all(ns, spec.metrics, scale.selector, [p.name for p in pods])
        else:
            readings = []  # paused: no metric is read
        history = self.histories.get(key) or _fresh_history(spec, prev_status)
        if book is not None:  # what the real HPA did, not what this shadow would have done
            window = spec.behavior.scale_down.stabilization_window_seconds if spec.behavior is not None else None
            history = book.history(key, self.histories.get(key), now,
                                   self.config.downscale_stabilization_window if window is None else float(window))
        decision = decide(
            DecisionInput(
                spec=spec,
                current_replicas=scale.replicas,
                status_replicas=scale.status_replicas,
                pods=pods,
                readings=readings,
                now=now,
                config=self.config,
                history=history,
                scaled_to_zero=any(
                    c.get("type") == "ScaledToZero" and c.get("status") == "True"
                    for c in prev_status.get("conditions") or ()
                ),
                paused=paused,
                namespace=ns,
                native=kind == HPA,
                overlap=found,
            )
        )
        self.observer.replicas(key, scale.replicas, decision.desired_replicas)
        if shadow:
            self.histories[key] = decision.history
            self.observer.shadow(key, decision.desired_replicas, None)
            if book is not None:
                book.decided(key, decision, now, synced, prev_status)
            return decision

        await self._metric_events(obj, decision, now)
        await self._control_events(obj, decision, prev_status, now)
        conditions = list(decision.conditions)
        last_scale: datetime | None = None
        history = decision.history
        if decision.scale and not self.dry_run:
            reason = _rescale_reason(decision)
            try:
                await self.scales.update(ns, target, scale, decision.desired_replicas)
            except ScaleError as exc:
                # logged before the writes, as fail() does, so the log never trails the Events
                self.warn(key, "FailedRescale", f"{_target(ns, target)} to {decision.desired_replicas}: {exc}")
                await self._event(
                    obj,
                    "Warning",
                    "FailedRescale",
                    f"New size: {decision.desired_replicas}; reason: {reason}; error: {exc}",
                    now,
                )
                # horizontal.go sets ScaledToZero only once the scale was written: kept as it was
                conditions = replace_condition(
                    without(conditions, SCALED_TO_ZERO),
                    Condition(
                        "AbleToScale",
                        "False",
                        "FailedUpdateScale",
                        f"the HPA controller was unable to update the target scale: {exc}",
                    ),
                )
                self.histories[key] = history
                await self._write_status(kind, obj, with_controls(build_status(
                    prev_status, generation=self.observed_generation(obj), current_replicas=scale.replicas,
                    desired_replicas=scale.replicas, current_metrics=decision.current_metrics,
                    conditions=conditions, last_scale_time=None, now=now), decision), scale.selector)
                raise SyncError(f"FailedRescale: {exc}") from None
            log.info(
                "%s %s/%s scaled %s %d -> %d: %s",
                kind,
                ns,
                name,
                _target(ns, target),
                scale.replicas,
                decision.desired_replicas,
                reason,
                extra={
                    "kind": kind,
                    "namespace": ns,
                    "autoscaler": name,
                    "target": f"{target.get('kind')}/{target.get('name')}",
                    "from": scale.replicas,
                    "to": decision.desired_replicas,
                    "reason": reason,
                },
            )  # logged before its Event is written, so the log never trails the Events
            await self._event(
                obj, "Normal", "SuccessfulRescale", f"New size: {decision.desired_replicas}; reason: {reason}", now
            )
            history = record_scale(history, now, scale.replicas, decision.desired_replicas, spec)
            last_scale = now
        self.histories[key] = history
        self.repeats.clear(key)
        await self._write_status(kind, obj, with_controls(build_status(
            prev_status, generation=self.observed_generation(obj), current_replicas=scale.replicas,
            desired_replicas=decision.desired_replicas, current_metrics=decision.current_metrics,
            conditions=conditions, last_scale_time=last_scale, now=now), decision), scale.selector)
        return decision

    def _overlap(self, key: WorkKey, text: str, selector: Selector, pod_keys: list[tuple[str, str]],
                 shadow: bool) -> SelectorOverlap:
        """Remember this autoscaler's selector and find every autoscaler of the namespace selecting
        some of its pods. A shadowed HPA counts HPAs only (kube-controller-manager knows no other)."""
        in_ns = self.selectors.setdefault(key[1], {})
        in_ns[key] = selector
        store = self.pods.informer.store
        labels = [store[k].labels for k in pod_keys if k in store]
        counted = {k: sel for k, sel in in_ns.items() if not shadow or k[0] == HPA}
        return SelectorOverlap(text, tuple(sorted(f"{k[1]}/{k[2]}" for k in selecting(labels, counted))))

    async def _metric_events(self, obj: Obj, decision: Decision, now: datetime) -> None:
        active = next((c for c in decision.conditions if c.type == "ScalingActive"), None)
        if active is not None and active.reason == "AmbiguousSelector":  # horizontal.go: both, the same words
            meta = obj.get("metadata") or {}
            self.warn((obj.get("kind", ""), meta.get("namespace", ""), meta.get("name", "")), active.reason,
                      active.message)
            await self._event(obj, "Warning", "AmbiguousSelector", active.message, now)
            await self._event(obj, "Warning", "FailedComputeMetricsReplicas", active.message, now)
        failed = [p for p in decision.proposals if p.replicas is None]
        for p in failed:
            await self._event(
                obj, "Warning", FAILED_GET.get(p.type, "FailedGetMetric"), p.error or "metric unavailable", now
            )
        if failed and decision.recommendation is None:
            await self._event(
                obj,
                "Warning",
                "FailedComputeMetricsReplicas",
                f"invalid metrics ({len(failed)} invalid out of {len(decision.proposals)}), "
                f"first error is: {failed[0].wrapped or failed[0].error}",
                now,
            )

    async def _control_events(self, obj: Obj, decision: Decision, prev_status: Obj, now: datetime) -> None:
        """A Warning while the fallback decides (naming the failing metrics; repeats are aggregated
        into one Event's count), and a Normal Event when a pause begins."""
        controls = decision.controls
        if controls is None:
            return
        was = {c.get("type"): c.get("status") for c in prev_status.get("conditions") or ()}
        for cond in decision.conditions:
            if cond.type == "Fallback" and cond.status == "True":
                await self._event(obj, "Warning", "FallbackActive", cond.message, now)
            elif cond.type == "Paused" and was.get("Paused") != "True":
                await self._event(obj, "Normal", cond.reason, cond.message, now)

    async def _event(self, obj: Obj, type_: str, reason: str, message: str, now: datetime) -> None:
        await self.events.record(obj, type_, reason, message, now)

    async def _write_status(self, kind: str, obj: Obj, status: Obj, selector: str | None = None) -> None:
        """PUT status through the status subresource; on 409 re-read and retry. A HorizontalAutoscaler's
        carries `selector`, its target's scale selector at this sync (else the one it had)."""
        if kind == CR:
            status = with_summary(status, obj.get("spec"))
            selector = selector or (obj.get("status") or {}).get("selector")
            if selector:
                status["selector"] = selector
        meta = obj.get("metadata") or {}
        key = (kind, meta.get("namespace", ""), meta.get("name", ""))
        self.observer.status(key, obj.get("spec") or {}, status)
        if status == (obj.get("status") or {}):
            return
        path = PATHS[kind].format(ns=meta.get("namespace"), name=meta.get("name"))
        body: Obj = {**obj, "status": status}
        for attempt in range(self.status_retries):
            try:
                written = await self.kube.request("PUT", f"{path}/status", body=body)
                version = (written.get("metadata") or {}).get("resourceVersion")
                if version and self.config.features.read_own_writes:
                    self.written[key] = str(version)
                return
            except ApiError as exc:
                if exc.not_found:
                    return  # deleted meanwhile
                if not exc.conflict or attempt == self.status_retries - 1:
                    raise SyncError(f"failed to update status: {exc.reason}: {exc.message}") from None
            try:
                fresh = await self.kube.get(path)
            except ApiError as exc:
                if exc.not_found:
                    return
                raise SyncError(f"failed to re-read for status update: {exc.reason}: {exc.message}") from None
            body = {**fresh, "status": status}
        raise SyncError("failed to update status: too many conflicts")  # pragma: no cover


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> Selector:
    """A selector as written, parsed once however many syncs and status events repeat it."""
    return parse_selector(text)


def _caught_up(seen: str, written: str) -> bool:
    """Whether a cache at resourceVersion `seen` holds a write made at `written`: compared as
    numbers (etcd's revisions), else only an equal version counts (client-go's isStoreReady)."""
    if not seen:
        return False
    if seen.isdigit() and written.isdigit():
        return int(seen) >= int(written)
    return seen == written


def _generation(obj: Obj) -> int | None:
    gen = (obj.get("metadata") or {}).get("generation")
    return int(gen) if gen is not None else None


def _rescale_reason(decision: Decision) -> str:
    """Which metric drove the change, in the Kubernetes controller's wording (horizontal.go's rescaleReason)."""
    return decision.rescale_reason



def _pause(kind: str, obj: Obj) -> Pause | None:
    return parse_pause(kind, (obj.get("metadata") or {}).get("annotations"))


def _fresh_history(spec: object, prev_status: Obj) -> History:
    """A first sync's history: empty, but with the failed syncs counted so far (status.metricFailures),
    so a restart does not restart the fallback's count."""
    failures = failures_so_far(spec, prev_status)
    return History(failures=failures) if failures else History()


def with_controls(status: Obj, decision: Decision) -> Obj:
    """The status with what the controls did: `control` (the printed CONTROL column: Paused,
    Paused(N), Fallback, Schedule(name)) and `metricFailures` (syncs in a row without metrics)."""
    controls = decision.controls
    if controls is None:
        return status
    summary = controls.summary()
    if summary:
        status["control"] = summary
    if controls.failures:
        status["metricFailures"] = controls.failures
    return status
