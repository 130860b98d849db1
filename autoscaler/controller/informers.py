"""Watch-based caches (informers): list once, then follow the watch stream.

As client-go's reflector: LIST for a snapshot and its resourceVersion, WATCH from there, resume
from the last seen resourceVersion when a stream ends or breaks, relist on 410 Gone. Consumers
read the cache; nothing re-LISTs per decision.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from autoscaler import objects
from autoscaler.decision.controls import PAUSED_ANNOTATION, PAUSED_REPLICAS_ANNOTATION
from autoscaler.decision.model import PodInfo
from promscaler.kubeapi import ApiError, Kube, Obj, query
from promscaler.selectors import Selector

from .apihealth import ApiHealth, describe, is_outage
from .stopping import sleep_or_stop, wait_or_stop

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)
Handler = Callable[[str, Any, Any], None]  # (event type, old, new): projections, None when absent
PAGE = 500  # items per LIST page (client-go's reflector lists 500 at a time)


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class _Shared(dict[str, Any]):
    """A dict that can be shared (weakly referenced by the interner): never mutated once made."""

    __slots__ = ("__weakref__",)


_shared: weakref.WeakValueDictionary[Any, _Shared] = weakref.WeakValueDictionary()


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return frozenset((k, _frozen(v)) for k, v in value.items())
    return value


def shared(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    """One dict for equal mappings of strings (and of mappings of strings to numbers): the
    labels and requests of the pods of one template are held once, not once per pod."""
    frozen = _frozen(mapping)
    kept = _shared.get(frozen)
    if kept is None:
        kept = _shared[frozen] = _Shared({sys.intern(k): shared(v) if isinstance(v, Mapping) else
                                          (sys.intern(v) if isinstance(v, str) else v) for k, v in mapping.items()})
    return kept


@dataclass(frozen=True, slots=True)
class CachedPod:
    """What the controller keeps of a pod: its namespace and labels (to select it) and its
    PodInfo (what the replica calculator reads: phase, deletion, readiness, start, requests)."""

    namespace: str
    labels: Mapping[str, str]
    info: PodInfo


def cached_pod(pod: Obj) -> CachedPod:
    """A pod's projection; raises ObjectError when a field the decision reads is malformed."""
    namespace = (pod.get("metadata") or {}).get("namespace") or ""
    return CachedPod(sys.intern(namespace), shared(objects.pod_labels(pod)), objects.pod_info(pod, share=shared))


_KEPT_META = ("name", "namespace", "uid", "resourceVersion", "generation")
_KEPT_ANNOTATIONS = (PAUSED_ANNOTATION, PAUSED_REPLICAS_ANNOTATION)


def slim_autoscaler(obj: Obj) -> Obj:
    """An autoscaler (HorizontalAutoscaler or HPA) as the controller reads it: spec, status and
    the metadata that names it, guards status writes (resourceVersion), tells a spec change
    (generation) and pauses it (the pause annotations); labels, managedFields and the
    last-applied annotation, which nothing reads, are dropped."""
    meta = obj.get("metadata") or {}
    slim_meta: Obj = {k: meta[k] for k in _KEPT_META if k in meta}
    annotations = meta.get("annotations") or {}
    kept = {k: annotations[k] for k in _KEPT_ANNOTATIONS if k in annotations}
    if kept:
        slim_meta["annotations"] = kept
    out: Obj = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    out["metadata"] = slim_meta
    for k in ("spec", "status"):
        if k in obj:
            out[k] = obj[k]
    return out


@dataclass(frozen=True, slots=True)
class CachedAutoscaler:
    """An autoscaler in the cache: its slim object as compact JSON (about 1 KB, against about
    4 KB as dicts), decoded when an event or a sync reads it (a few microseconds)."""

    body: bytes

    def object(self) -> Obj:
        return orjson.loads(self.body)


def cached_autoscaler(obj: Obj) -> CachedAutoscaler:
    # copied to a bytes of its own size: orjson's result keeps its 4 KB write buffer allocated
    return CachedAutoscaler(bytes(memoryview(orjson.dumps(slim_autoscaler(obj)))))


def as_object(cached: CachedAutoscaler | None) -> Obj | None:
    return cached.object() if cached is not None else None


class Informer:
    """A cache of one resource kind (in one namespace or all), kept current by a watch."""

    def __init__(self, kube: Kube, path: str, *, name: str, label_selector: str | None = None,
                 watch_timeout: float = 300.0, project: Callable[[Obj], Any] | None = None,
                 health: ApiHealth | None = None, absent: str | None = None, absent_poll: float = 10.0,
                 page_size: int = PAGE) -> None:
        """`project`: what the cache keeps of each object (default: the object); an object it
        cannot read is left out (logged). `health`: outages are reported there (one warning for
        all) and waited out. `absent`: the resource is optional (a CRD): a 404 counts as synced
        and empty, is logged once with this message, and the list is retried every `absent_poll`
        seconds until the resource appears."""
        self.kube = kube
        self.path = path
        self.name = name
        self.label_selector = label_selector
        self.watch_timeout = watch_timeout
        self.project = project
        self.page_size = page_size
        self.store: dict[Key, Any] = {}  # project(obj) per object, built once per change
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.handlers: list[Handler] = []
        self.relists = 0
        self.rewatches = 0
        self.health = health
        self.absent = absent
        self.absent_poll = absent_poll
        self.missing = False  # the optional resource is not served (yet)

    def add_handler(self, handler: Handler) -> None:
        self.handlers.append(handler)

    def get(self, key: Key) -> Any:
        return self.store.get(key)

    def _emit(self, kind: str, old: Any, new: Any) -> None:
        for handler in self.handlers:
            try:
                handler(kind, old, new)
            except Exception:  # a handler bug must not kill the watch
                log.exception("informer handler failed", extra={"informer": self.name})

    def _projection(self, key: Key, obj: Obj) -> Any:
        """What the cache keeps of `obj`; None when it cannot be read (logged)."""
        if self.project is None:
            return obj
        try:
            return self.project(obj)
        except Exception as exc:  # a malformed object is skipped, not fatal to the watch
            log.warning("cannot read %s %s/%s: %s", self.name, key[0], key[1], exc)
            return None

    def _put(self, key: Key, new: Any) -> None:
        if new is None:
            self._remove(key)
            return
        old = self.store.get(key)
        self.store[key] = new
        self._emit("ADDED" if old is None else "MODIFIED", old, new)

    def _remove(self, key: Key) -> None:
        old = self.store.pop(key, None)
        if old is not None:
            self._emit("DELETED", old, None)

    async def _list(self) -> None:
        """LIST page by page, projecting each page's items, then replace the cache: an event per
        object that is new, changed or gone. The first page's resourceVersion is where the watch
        resumes: a server that pages a live store (not a snapshot) replays what changed since."""
        fresh: dict[Key, Any] = {}
        token, version = None, None
        while True:
            body = await self.kube.get(self.path, query(labelSelector=self.label_selector,
                                                        limit=self.page_size or None, **{"continue": token}))
            for item in body.get("items") or ():
                key = key_of(item)
                fresh[key] = self._projection(key, item)
            meta = body.get("metadata") or {}
            if version is None:
                version = meta.get("resourceVersion", "")
            token = meta.get("continue")
            del body
            if not token:
                break
        for key in [k for k in self.store if k not in fresh]:
            self._remove(key)
        for key, new in fresh.items():
            if self.store.get(key) != new:  # unchanged objects send no event (projections compare by value)
                self._put(key, new)
        self.resource_version = version or ""
        if self.missing:
            self.missing = False
            log.info("%s are served now: watching them", self.name, extra={"informer": self.name})
        self.relists += 1
        self.synced.set()

    async def _watch(self) -> None:
        q = query(labelSelector=self.label_selector, resourceVersion=self.resource_version)
        async for event in self.kube.watch(self.path, q, timeout=self.watch_timeout * (1 + random.random())):
            kind, obj = event.get("type"), event.get("object") or {}
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if kind in ("ADDED", "MODIFIED"):
                key = key_of(obj)
                self._put(key, self._projection(key, obj))
            elif kind == "DELETED":
                self._remove(key_of(obj))
            if rv:  # a BOOKMARK (Kube.watch allows them) only moves it on: a quiet watch resumes, not relists
                self.resource_version = rv

    async def run(self, stop: asyncio.Event) -> None:
        """List, then watch until `stop`; never raises."""
        need_list, backoff, cut_in_a_row = True, 0.2, 0
        while not stop.is_set():
            try:
                if need_list:
                    await self._list()
                    need_list = False
                await self._watch()
                backoff, cut_in_a_row = 0.2, 0
                self.rewatches += 1  # the server ended the stream (timeout): resume from our RV
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                if exc.gone:
                    log.info("watch expired, relisting", extra={"informer": self.name})
                    need_list = True
                    continue
                if exc.not_found and self.absent is not None:
                    self._set_missing()
                    need_list = True
                    if await sleep_or_stop(stop, self.absent_poll):
                        return
                    continue
                if self.health is not None and is_outage(exc):
                    self.health.failed(exc)
                    if await self._wait_up(stop):
                        return
                    continue
                log.warning("watch failed: %s", exc, extra={"informer": self.name})
                need_list = need_list or exc.status not in (500, 503, 504, 429)
                if await sleep_or_stop(stop, backoff):
                    return
                backoff = min(backoff * 2, 30.0)
            except aiohttp.ClientPayloadError as exc:  # the stream was cut (a server going away): resume at once
                log.debug("watch of %s cut: %s", self.name, describe(exc))
                self.rewatches += 1
                if cut_in_a_row and await sleep_or_stop(stop, backoff):
                    return
                cut_in_a_row += 1
                if cut_in_a_row > 1:
                    backoff = min(backoff * 2, 30.0)
            except Exception as exc:  # broken connection, malformed stream: resume from our RV
                if self.health is not None and is_outage(exc):
                    self.health.failed(exc)
                    log.debug("watch of %s interrupted: %s", self.name, describe(exc))
                    self.rewatches += 1
                    if await self._wait_up(stop):
                        return
                    continue
                log.warning("watch stream broke: %s", exc or type(exc).__name__, extra={"informer": self.name})
                self.rewatches += 1
                if await sleep_or_stop(stop, backoff):
                    return
                backoff = min(backoff * 2, 30.0)


    def _set_missing(self) -> None:
        """The optional resource is not served: an empty, synced cache (said once)."""
        if not self.missing:
            self.missing = True
            log.info(self.absent, extra={"informer": self.name})
        for key in list(self.store):
            self._remove(key)
        self.synced.set()

    async def _wait_up(self, stop: asyncio.Event) -> bool:
        """Wait for the shared ApiHealth to see the API server again; True when stopping."""
        assert self.health is not None
        return await wait_or_stop(stop, self.health.wait_up())


class PodIndex:
    """Pods (an informer of CachedPods) by namespace and by `label=value`, so a selector touches
    only its candidates."""

    def __init__(self, informer: Informer) -> None:
        self.informer = informer
        self.by_ns: dict[str, set[Key]] = {}
        self.by_label: dict[tuple[str, str, str], set[Key]] = {}
        informer.add_handler(self._on_event)

    def _on_event(self, kind: str, old: CachedPod | None, new: CachedPod | None) -> None:
        if old is not None:
            key = (old.namespace, old.info.name)
            self.by_ns.get(key[0], set()).discard(key)
            for label, value in old.labels.items():
                self.by_label.get((key[0], label, value), set()).discard(key)
        if new is not None:
            key = (new.namespace, new.info.name)
            self.by_ns.setdefault(key[0], set()).add(key)
            for label, value in new.labels.items():
                self.by_label.setdefault((key[0], label, value), set()).add(key)

    def select(self, namespace: str, selector: Selector) -> list[Key]:
        """Keys of the namespace's pods that match, in name order."""
        pinned = selector.pinned()
        candidates: Iterable[Key] = (self.by_ns.get(namespace, set()) if pinned is None
                                     else self.by_label.get((namespace, *pinned), set()))
        store = self.informer.store
        out = [k for k in candidates if k in store and selector.matches(store[k].labels)]
        out.sort()
        return out

    def info(self, key: Key) -> PodInfo | None:
        pod = self.informer.store.get(key)
        return pod.info if pod is not None else None
