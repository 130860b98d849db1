"""Watch-based caches (informers): list once, then follow the watch stream.

As client-go's reflector: LIST for a snapshot and its resourceVersion, WATCH from there, resume
from the last seen resourceVersion when a stream ends or breaks, relist on 410 Gone. Consumers
read the cache; nothing re-LISTs per decision.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterable
from typing import Any

import aiohttp

from promscaler.kubeapi import ApiError, Kube, Obj, query
from promscaler.selectors import Operator, Selector

from .apihealth import ApiHealth, describe, is_outage
from .stopping import sleep_or_stop

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)
Handler = Callable[[str, Obj | None, Obj | None], None]  # (event type, old, new)


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class Informer:
    """A cache of one resource kind (in one namespace or all), kept current by a watch."""

    def __init__(self, kube: Kube, path: str, *, name: str, label_selector: str | None = None,
                 watch_timeout: float = 300.0, transform: Callable[[Obj], Any] | None = None,
                 health: ApiHealth | None = None, absent: str | None = None, absent_poll: float = 10.0) -> None:
        """`health`: outages are reported there (one warning for all) and waited out. `absent`: the
        resource is optional (a CRD): a 404 counts as synced and empty, is logged once with this
        message, and the list is retried every `absent_poll` seconds until the resource appears."""
        self.kube = kube
        self.path = path
        self.name = name
        self.label_selector = label_selector
        self.watch_timeout = watch_timeout
        self.transform = transform
        self.store: dict[Key, Obj] = {}
        self.derived: dict[Key, Any] = {}  # transform(obj), computed once per change
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

    def get(self, key: Key) -> Obj | None:
        return self.store.get(key)

    def _emit(self, kind: str, old: Obj | None, new: Obj | None) -> None:
        for handler in self.handlers:
            try:
                handler(kind, old, new)
            except Exception:  # a handler bug must not kill the watch
                log.exception("informer handler failed", extra={"informer": self.name})

    def _put(self, obj: Obj) -> None:
        key = key_of(obj)
        old = self.store.get(key)
        self.store[key] = obj
        if self.transform is not None:
            try:
                self.derived[key] = self.transform(obj)
            except Exception as exc:  # a malformed object is skipped, not fatal to the watch
                self.derived.pop(key, None)
                log.warning("cannot read %s %s/%s: %s", self.name, key[0], key[1], exc)
        self._emit("ADDED" if old is None else "MODIFIED", old, obj)

    def _remove(self, obj: Obj) -> None:
        key = key_of(obj)
        old = self.store.pop(key, None)
        self.derived.pop(key, None)
        if old is not None:
            self._emit("DELETED", old, None)

    async def _list(self) -> None:
        body = await self.kube.get(self.path, query(labelSelector=self.label_selector))
        items = body.get("items") or []
        fresh = {key_of(item): item for item in items}
        for key in [k for k in self.store if k not in fresh]:
            self._remove(self.store[key])
        for key, item in fresh.items():
            old = self.store.get(key)
            if old is None or _rv(old) != _rv(item):
                self._put(item)
        self.resource_version = (body.get("metadata") or {}).get("resourceVersion", "")
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
                self._put(obj)
            elif kind == "DELETED":
                self._remove(obj)
            if rv:
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
            self._remove(self.store[key])
        self.synced.set()

    async def _wait_up(self, stop: asyncio.Event) -> bool:
        """Wait for the shared ApiHealth to see the API server again; True when stopping."""
        assert self.health is not None
        waiter = asyncio.ensure_future(self.health.wait_up())
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            stopper.cancel()
        return stop.is_set()


def _rv(obj: Obj) -> str:
    return (obj.get("metadata") or {}).get("resourceVersion", "")


class PodIndex:
    """Pods by namespace and by `label=value`, so a selector touches only its candidates."""

    def __init__(self, informer: Informer) -> None:
        self.informer = informer
        self.by_ns: dict[str, set[Key]] = {}
        self.by_label: dict[tuple[str, str, str], set[Key]] = {}
        informer.add_handler(self._on_event)

    def _labels(self, obj: Obj) -> dict[str, str]:
        return (obj.get("metadata") or {}).get("labels") or {}

    def _on_event(self, kind: str, old: Obj | None, new: Obj | None) -> None:
        if old is not None:
            key = key_of(old)
            self.by_ns.get(key[0], set()).discard(key)
            for label, value in self._labels(old).items():
                self.by_label.get((key[0], label, value), set()).discard(key)
        if new is not None:
            key = key_of(new)
            self.by_ns.setdefault(key[0], set()).add(key)
            for label, value in self._labels(new).items():
                self.by_label.setdefault((key[0], label, value), set()).add(key)

    def select(self, namespace: str, selector: Selector) -> list[Key]:
        """Keys of the namespace's pods that match, in name order."""
        candidates: Iterable[Key] | None = None
        for req in selector.requirements:
            if req.operator in (Operator.EQUALS, Operator.IN) and len(req.values) == 1:
                candidates = self.by_label.get((namespace, req.key, req.values[0]), set())
                break
        if candidates is None:
            candidates = self.by_ns.get(namespace, set())
        store = self.informer.store
        out = [k for k in candidates if k in store and selector.matches(self._labels(store[k]))]
        out.sort()
        return out
