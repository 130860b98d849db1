"""The object store: objects by resource, one global resourceVersion counter, a bounded event
history for watch resumption (410 Expired beyond it), and fan-out of events to watchers.

Thread-safe: every read and write takes one lock, and watchers are woken in their own event loop
with `call_soon_threadsafe`, so tests may write from any thread while the server streams.
Stored dicts are never mutated in place (a write stores a new dict), so events share them safely.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from kubesim.fields import Filter
from kubesim.resources import ResourceType
from promscaler.status import AlreadyExists, Conflict, Gone, Invalid, NotFound
from promscaler.times import format_time

__all__ = ["Event", "Store", "Watcher", "copy", "now", "random_suffix"]

Obj = dict[str, Any]
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.String alphabet


def copy(obj: Any) -> Any:
    return orjson.loads(orjson.dumps(obj))


def now() -> str:
    return format_time(datetime.now(UTC))


def random_suffix(n: int = 5) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(n))


def qualified(t: ResourceType) -> str:
    return f"{t.plural}.{t.group}" if t.group else t.plural


def not_found(t: ResourceType, name: str) -> NotFound:
    return NotFound(f'{qualified(t)} "{name}" not found', {"name": name, "group": t.group, "kind": t.plural})


def _body(obj: Obj) -> Obj:
    """Everything a generation counts: the object minus metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _without_rv(obj: Obj) -> Obj:
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


@dataclass(frozen=True, slots=True)
class Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    key: tuple[str, str]
    obj: Obj
    old: Obj | None = None


@dataclass(eq=False)
class Watcher:
    """One watch stream (or in-process subscriber): filters events and turns selector
    transitions into ADDED/DELETED, as the apiserver's watch cache does."""

    key: tuple[str, str]
    filter: Filter
    loop: asyncio.AbstractEventLoop
    callback: Callable[[str, Obj], None] | None = None  # in-process subscriber instead of a queue
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    seen_rv: int = 0
    closed: bool = False

    def translate(self, ev: Event) -> str | None:
        new = self.filter.matches(ev.obj)
        if ev.type == "MODIFIED" and ev.old is not None:
            old = self.filter.matches(ev.old)
            if new and not old:
                return "ADDED"
            if old and not new:
                return "DELETED"
        return ev.type if new else None

    def deliver(self, ev: Event) -> None:
        if self.closed:
            return
        self.seen_rv = max(self.seen_rv, ev.rv)
        kind = self.translate(ev)
        if kind is None:
            return
        if self.callback is not None:
            self.callback(kind, ev.obj)
        else:
            self.queue.put_nowait((kind, ev.obj))

    def close(self) -> None:
        """End the stream (server stopping)."""
        if not self.closed and self.callback is None:
            self.queue.put_nowait(None)
        self.closed = True


class Store:
    def __init__(self, history: int = 10_000) -> None:
        self._lock = threading.RLock()
        self._rv = 0
        self._objects: dict[tuple[str, str], dict[str, dict[str, Obj]]] = {}  # resource -> namespace -> name
        self._history: deque[Event] = deque()
        self._history_size = history
        self._compacted = 0  # newest rv dropped from the history
        self._watchers: dict[tuple[str, str], set[Watcher]] = {}

    # --- reads -----------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, t: ResourceType, namespace: str, name: str) -> Obj | None:
        """The stored dict itself: callers must not mutate it."""
        with self._lock:
            return self._find(t, namespace if t.namespaced else "", name)

    def list(self, t: ResourceType, flt: Filter | None = None) -> tuple[list[Obj], int]:
        """Matching stored dicts sorted by namespace and name, and the list resourceVersion."""
        with self._lock:
            by_ns = self._objects.get(t.key, {})
            spaces = [flt.namespace] if flt is not None and flt.namespace is not None else sorted(by_ns)
            items: list[Obj] = []
            for ns in spaces:
                objs = by_ns.get(ns, {})
                items.extend(objs[n] for n in sorted(objs) if flt is None or flt.matches(objs[n]))
            return items, self._rv

    def _find(self, t: ResourceType, ns: str, name: str) -> Obj | None:
        return self._objects.get(t.key, {}).get(ns, {}).get(name)

    # --- writes ----------------------------------------------------------------------------

    def create(self, t: ResourceType, obj: Obj) -> Obj:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + random_suffix()
        name = meta.get("name")
        if not name:
            raise Invalid(f"{t.kind} is invalid: metadata.name: Required value: name or generateName is required",
                          {"group": t.group, "kind": t.kind})
        ns = meta.get("namespace", "") if t.namespaced else ""
        if not t.namespaced:
            meta.pop("namespace", None)
        with self._lock:
            if self._find(t, ns, name) is not None:
                raise AlreadyExists(f'{qualified(t)} "{name}" already exists',
                                    {"name": name, "group": t.group, "kind": t.plural})
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now()
            if t.generation:
                meta["generation"] = 1
            return self._commit(t, "ADDED", obj, None)

    def update(self, t: ResourceType, namespace: str, name: str, change: Callable[[Obj], Obj],
               create_missing: Callable[[], Obj] | None = None) -> Obj:
        """Atomically replace an object with `change(copy_of_current)`.

        `change` may raise a StatusError; a resourceVersion set on its result must equal the
        current one (optimistic concurrency, 409 Conflict otherwise).
        """
        ns = namespace if t.namespaced else ""
        with self._lock:
            old = self._find(t, ns, name)
            if old is None:
                if create_missing is None:
                    raise not_found(t, name)
                return self.create(t, create_missing())
            new = change(copy(old))
            meta = new.setdefault("metadata", {})
            rv = meta.get("resourceVersion")
            if rv not in (None, "") and str(rv) != old["metadata"]["resourceVersion"]:
                raise Conflict(
                    f'Operation cannot be fulfilled on {qualified(t)} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                    {"name": name, "group": t.group, "kind": t.plural},
                )
            if meta.get("name", name) != name:
                raise Invalid(f'{t.kind} "{name}" is invalid: metadata.name: '
                              f'the name of the object ({meta.get("name")}) '
                              f"does not match the name on the URL ({name})", {"name": name, "kind": t.kind})
            old_meta = old["metadata"]
            meta["name"] = name
            if t.namespaced:
                meta["namespace"] = ns
            else:
                meta.pop("namespace", None)
            for k in ("uid", "creationTimestamp", "generation"):
                if k in old_meta:
                    meta[k] = old_meta[k]
                else:
                    meta.pop(k, None)
            if t.generation and _body(new) != _body(old):
                meta["generation"] = old_meta.get("generation", 0) + 1
            if _without_rv(new) == _without_rv(old):
                return old  # no-op writes keep the resourceVersion, as the apiserver does
            return self._commit(t, "MODIFIED", new, old)

    def delete(self, t: ResourceType, namespace: str, name: str, uid: str | None = None,
               resource_version: str | None = None) -> Obj:
        """Delete, with DeleteOptions' preconditions (uid, resourceVersion) checked as the apiserver does."""
        ns = namespace if t.namespaced else ""
        with self._lock:
            old = self._find(t, ns, name)
            if old is None:
                raise not_found(t, name)
            if uid and old["metadata"].get("uid") != uid:
                raise Conflict(f"Precondition failed: UID in precondition: {uid}, "
                               f'UID in object meta: {old["metadata"].get("uid")}',
                               {"name": name, "group": t.group, "kind": t.plural})
            if resource_version and old["metadata"].get("resourceVersion") != resource_version:
                raise Conflict(f"Precondition failed: ResourceVersion in precondition: {resource_version}, "
                               f'ResourceVersion in object meta: {old["metadata"].get("resourceVersion")}',
                               {"name": name, "group": t.group, "kind": t.plural})
            del self._objects[t.key][ns][name]
            gone = copy(old)
            return self._commit(t, "DELETED", gone, old)

    def _commit(self, t: ResourceType, kind: str, obj: Obj, old: Obj | None) -> Obj:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        meta = obj["metadata"]
        if kind != "DELETED":
            self._objects.setdefault(t.key, {}).setdefault(meta.get("namespace", ""), {})[meta["name"]] = obj
        ev = Event(self._rv, kind, t.key, obj, old)
        self._history.append(ev)
        while len(self._history) > self._history_size:
            self._compacted = self._history.popleft().rv
        for w in list(self._watchers.get(t.key, ())):
            try:
                w.loop.call_soon_threadsafe(w.deliver, ev)
            except RuntimeError:  # its loop is closed
                self._watchers[t.key].discard(w)
        return obj

    def compact(self) -> None:
        """Forget the whole event history (what etcd compaction does), for 410 tests."""
        with self._lock:
            self._compacted = self._rv
            self._history.clear()

    # --- watches ---------------------------------------------------------------------------

    def watch(self, t: ResourceType, flt: Filter, resource_version: str | None, loop: asyncio.AbstractEventLoop,
              callback: Callable[[str, Obj], None] | None = None) -> Watcher:
        """Register a watcher, first queueing what it missed: the current objects as ADDED when
        no resourceVersion (or "0") is given, else the history after it. Raises Gone if that
        history is compacted."""
        w = Watcher(t.key, flt, loop, callback)
        with self._lock:
            if resource_version in (None, "", "0"):
                items, _ = self.list(t, flt)
                for obj in items:
                    w.deliver(Event(int(obj["metadata"]["resourceVersion"]), "ADDED", t.key, obj))
            else:
                try:
                    since = int(resource_version)
                except ValueError:
                    raise Invalid(f"resourceVersion: Invalid value: {resource_version!r}: must be an integer") from None
                if since < self._compacted:
                    raise Gone(f"too old resource version: {since} ({self._compacted + 1})")
                for ev in self._history:
                    if ev.rv > since and ev.key == t.key:
                        w.deliver(ev)
            w.seen_rv = self._rv
            self._watchers.setdefault(t.key, set()).add(w)
        return w

    def watcher_count(self) -> int:
        with self._lock:
            return sum(len(ws) for ws in self._watchers.values())

    def unwatch(self, w: Watcher) -> None:
        with self._lock:
            self._watchers.get(w.key, set()).discard(w)
        w.closed = True

    def close_watchers(self, streams_only: bool = False) -> None:
        """End every watch stream (and with `streams_only=False` every in-process subscriber too)."""
        with self._lock:
            watchers = [w for ws in self._watchers.values() for w in ws if not (streams_only and w.callback)]
            for w in watchers:
                self._watchers[w.key].discard(w)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for w in watchers:
            if w.loop is running:
                w.close()
            else:
                with contextlib.suppress(RuntimeError):
                    w.loop.call_soon_threadsafe(w.close)
