"""Object labels from Kubernetes for `*` + `labelSelector`: a watch-based cache per resource.

One informer per resource kind (started on first use): LIST, then WATCH from its
resourceVersion with bookmarks, applying ADDED/MODIFIED/DELETED; a 410 Gone (or any broken
watch) means LIST again. Requests read the in-memory index, never the API server.
Lists and watches are plain GETs of the resource's path through the shared JSON client
(promscaler.kubeapi: the official client's authentication and TLS, its status and watch decoding):
the well-known core kinds and any resource of a non-core group (a CRD found by API discovery).
Only names, namespaces and labels are kept, indexed by namespace and by label pair, so a
selector with an `=`/`in` clause reads only the objects that can match (issue 7: 5,000 pods).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from kubernetes.aio.client.configuration import Configuration

from adapter.naming import Resource
from promscaler.kubeapi import ApiError, Kube
from promscaler.selectors import Operator, Selector
from promscaler.status import BadRequest, ServiceUnavailable

__all__ = ["KubeRequestError", "LabelCache", "LabelIndex", "client", "connect", "request_json"]

log = logging.getLogger("adapter.kube")

# core resources with a cluster-wide list; any resource of a non-core group (a CRD) is listed too
_CORE_LISTS = frozenset({"pods", "services", "nodes", "namespaces", "persistentvolumeclaims"})
USER_AGENT = "promscaler-adapter"
LIST_TIMEOUT = 300.0  # seconds for one LIST: the client's default, for 5,000 pods on a busy API server

Key = tuple[str, str]  # (namespace or "", name)
_changes = itertools.count(1)  # one sequence for every index: a higher version is always a later state


def _entry(obj: Mapping) -> tuple[Key, dict[str, str]]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or ""), dict(meta.get("labels") or {})


class LabelIndex:
    """Objects' labels with postings per namespace and per (label, value); `version` changes
    whenever what a selector can select does (a status-only update of a pod does not)."""

    def __init__(self, entries: Iterable[tuple[Key, dict[str, str]]] = ()) -> None:
        self.items: dict[Key, dict[str, str]] = {}
        self._by_namespace: dict[str, set[Key]] = defaultdict(set)
        self._by_pair: dict[tuple[str, str], set[Key]] = defaultdict(set)
        self.version = next(_changes)
        for key, labels in entries:
            self.put(key, labels)

    def __len__(self) -> int:
        return len(self.items)

    def put(self, key: Key, labels: dict[str, str]) -> None:
        if self.items.get(key) == labels:
            return
        self.delete(key)
        self.version = next(_changes)
        self.items[key] = labels
        self._by_namespace[key[0]].add(key)
        for pair in labels.items():
            self._by_pair[pair].add(key)

    def delete(self, key: Key) -> None:
        old = self.items.pop(key, None)
        if old is None:
            return
        self.version = next(_changes)
        self._discard(self._by_namespace, key[0], key)
        for pair in old.items():
            self._discard(self._by_pair, pair, key)

    @staticmethod
    def _discard(postings: dict, k, key: Key) -> None:
        keys = postings.get(k)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del postings[k]

    def select(self, namespace: str | None, selector: Selector) -> set[str]:
        """Names of the objects in `namespace` (None: all) that match `selector`.

        The namespace and every `=`/`in` clause are set intersections over the postings, smallest
        first; only the other clauses (`!=`, `notin`, exists...) are checked object by object."""
        postings: list = [] if namespace is None else [self._by_namespace.get(namespace, set())]
        rest = []
        for r in selector.requirements:
            if r.operator in (Operator.EQUALS, Operator.IN):
                if len(r.values) == 1:
                    postings.append(self._by_pair.get((r.key, r.values[0]), set()))
                else:
                    postings.append(set().union(*(self._by_pair.get((r.key, v), ()) for v in r.values)))
            else:
                rest.append(r)
        if postings:
            postings.sort(key=len)
            candidates = postings[0]
            for other in postings[1:]:
                candidates = candidates & other  # a new set: the postings stay untouched
        else:
            candidates = self.items.keys()
        if not rest:
            return {key[1] for key in candidates}
        others, items = Selector(tuple(rest)), self.items
        return {key[1] for key in candidates if others.matches(items[key])}


def list_path(resource: Resource) -> str | None:
    """The cluster-wide list/watch path of `resource` (`/api/v1/pods`, `/apis/apps/v1/deployments`),
    or None when its labels are not looked up."""
    if resource.group:
        return f"/apis/{resource.group}/{resource.version}/{resource.plural}"
    return f"/api/{resource.version}/{resource.plural}" if resource.plural in _CORE_LISTS else None


def retry_pause(failures: int, base: float, cap: float = 30.0) -> float:
    """Seconds to wait after `failures` failed attempts in a row: base, 2x, 4x... up to `cap`."""
    return min(base * 2 ** (max(failures, 1) - 1), cap)


class KubeRequestError(Exception):
    """A request to the Kubernetes API failed; the message is one line."""


async def request_json(kube: Kube, method: str, path: str, body: Any = None,
                       timeout: float = 30.0, accept: str = "application/json") -> dict[str, Any]:
    """A JSON object from the API server (the reviews, a ConfigMap); an answer of 300 and above
    raises `ApiError`, an answer that is not an object `KubeRequestError`."""
    doc = await kube.request(method, path, body=body, timeout=timeout, accept=accept)
    if not isinstance(doc, dict):
        raise KubeRequestError("the answer is not a JSON object")
    return doc


def _failure(exc: ApiError) -> str:
    """An informer's last error, in one line (it reaches clients in a 503): the status and the
    Status message (`HTTP 403 Forbidden: pods is forbidden: ...`), else the answer's first 200 bytes."""
    if exc.message and exc.reason != exc.phrase:  # a metav1.Status (or a watch's ERROR event) said why
        return f"HTTP {exc.status} {exc.phrase or exc.reason}: {exc.message}"
    said = exc.body[:200].decode("utf-8", "replace").strip() if exc.body else exc.reason
    return f"HTTP {exc.status} {said}"


class _Informer:
    def __init__(self, kube: Kube, resource: Resource, relist_backoff: float = 1.0,
                 watch_timeout: int = 300, field_selector: str = "") -> None:
        path = list_path(resource)
        if path is None:
            raise BadRequest(f"labelSelector lookups are not supported for {resource.api_name}")
        self.kube, self.path = kube, path
        self.query = [("fieldSelector", field_selector)] if field_selector else []
        self.resource = resource
        self.index = LabelIndex()
        self.synced = asyncio.Event()
        self.last_error: str | None = None
        self.backoff = relist_backoff
        self.watch_timeout = watch_timeout
        self.relists = 0
        self.resource_version = ""  # the last one seen: where a watch resumes
        self.task = asyncio.create_task(self._run(), name=f"informer-{resource.api_name}")

    async def _list(self) -> str:
        doc = await self.kube.request("GET", self.path, self.query, timeout=LIST_TIMEOUT)
        self.index = LabelIndex(_entry(o) for o in doc.get("items") or ())  # swapped whole
        self.relists += 1
        self.synced.set()
        self.last_error = None
        self.resource_version = (doc.get("metadata") or {}).get("resourceVersion") or ""
        return self.resource_version

    async def _watch(self, rv: str) -> str:
        """One watch from `rv` until the server ends it; an ERROR event (410 Gone and the like)
        raises `ApiError` with its code."""
        async for event in self.kube.watch(self.path, [*self.query, ("resourceVersion", rv)], self.watch_timeout):
            obj, kind = event.get("object") or {}, event.get("type")
            rv = self.resource_version = (obj.get("metadata") or {}).get("resourceVersion") or rv
            if kind == "BOOKMARK":
                continue
            key, labels = _entry(obj)
            if kind == "DELETED":
                self.index.delete(key)
            else:
                self.index.put(key, labels)
        return rv

    async def _run(self, rv: str = "") -> None:
        """List once, then watch from `rv` for ever; a broken or expired watch lists again.
        Failures in a row wait twice as long each time, up to 30 s (a deleted CRD, RBAC that
        forbids the list), and only the first of them is a warning, as client-go's reflector does."""
        failures = 0
        while True:
            try:
                if not rv:
                    rv = await self._list()
                    failures = 0
                rv = await self._watch(rv)  # returns at the server-side timeout: continue from rv
                continue
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                rv = ""
                if exc.gone:
                    log.info("watch on %s expired (410 Gone): relisting", self.resource.api_name)
                    continue
                self.last_error = _failure(exc)
            except Exception as exc:  # connection loss and the like: relist after a pause
                rv = ""
                self.last_error = f"{type(exc).__name__}: {exc}"
            failures += 1
            pause = retry_pause(failures, self.backoff)
            log.log(logging.WARNING if failures == 1 else logging.DEBUG, "watch on %s failed: %s (retrying in %gs)",
                    self.resource.api_name, self.last_error, pause)
            await asyncio.sleep(pause)


class LabelCache:
    """`names(resource, namespace, selector)`: objects that exist now and match the selector."""

    def __init__(self, kube: Kube, sync_timeout: float = 5.0, watch_timeout: int = 300) -> None:
        self.kube = kube
        self.sync_timeout = sync_timeout
        self.watch_timeout = watch_timeout
        self._informers: dict[str, _Informer] = {}  # by api name (plus `?fieldSelector=...` when watched so)

    @staticmethod
    def _key(resource: Resource, field_selector: str) -> str:
        return f"{resource.api_name}?fieldSelector={field_selector}" if field_selector else resource.api_name

    def _informer(self, resource: Resource, field_selector: str = "") -> _Informer:
        key = self._key(resource, field_selector)
        inf = self._informers.get(key)
        if inf is None:
            if list_path(resource) is None:
                raise BadRequest(f"labelSelector lookups are not supported for {resource.api_name}")
            inf = self._informers[key] = _Informer(
                self.kube, resource, watch_timeout=self.watch_timeout, field_selector=field_selector)
        return inf

    async def index(self, resource: Resource, field_selector: str = "") -> LabelIndex:
        """The current objects of `resource` (those matching `field_selector`, watched as such)."""
        inf = self._informer(resource, field_selector)
        if not inf.synced.is_set():
            try:
                await asyncio.wait_for(asyncio.shield(inf.synced.wait()), timeout=self.sync_timeout)
            except TimeoutError:
                raise ServiceUnavailable(f"the labels of {resource.api_name} are not available from Kubernetes yet"
                                         + (f": {inf.last_error}" if inf.last_error else "")) from None
        return inf.index

    def unsynced(self, resource: Resource, field_selector: str = "") -> str | None:
        """None once the cache of `resource` (started by `start`) has listed, else why not."""
        inf = self._informers.get(self._key(resource, field_selector))
        if inf is not None and inf.synced.is_set():
            return None
        why = (inf.last_error if inf is not None else None) or "waiting"
        return f"the {resource.api_name} cache has not synced with Kubernetes yet: {why}"

    async def names(self, resource: Resource, namespace: str | None, selector: Selector) -> set[str]:
        index = await self.index(resource)
        return index.select(namespace if resource.namespaced and namespace else None, selector)

    @property
    def version(self) -> int:
        """Changes whenever any cached object set or label does: answers derived from `names` are
        valid while it stays the same."""
        return max((inf.index.version for inf in self._informers.values()), default=0)

    def start(self, *resources: Resource, field_selector: str = "") -> None:
        for r in resources:
            self._informer(r, field_selector)

    async def get_json(self, path: str, accept: str = "application/json") -> dict:
        """GET an API path (discovery documents); failures raise `KubeRequestError` in one line."""
        try:
            return await request_json(self.kube, "GET", path, timeout=10, accept=accept)
        except ApiError as exc:
            try:
                said = orjson.loads(exc.body).get("message") or exc.phrase
            except (orjson.JSONDecodeError, AttributeError):
                said = exc.phrase
            raise KubeRequestError(f"HTTP {exc.status}: {said}") from None

    async def aclose(self) -> None:
        tasks = [inf.task for inf in self._informers.values()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.kube.close()


def client(configuration: Configuration) -> Kube:
    """The adapter's client for the cluster `configuration` points at (the configuration's own pool size)."""
    return Kube(configuration, pool_size=None, user_agent=USER_AGENT)


async def connect(configuration: Configuration) -> LabelCache:
    """A label cache talking to the cluster `configuration` (promscaler.kubeconfig) points at."""
    return LabelCache(client(configuration))
