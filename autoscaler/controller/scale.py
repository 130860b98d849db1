"""Scale targets of any kind, through API discovery and the `/scale` subresource.

`scaleTargetRef` names an apiVersion and a kind; discovery tells which resource that kind is
and whether it has a `scale` subresource, so Deployments, StatefulSets, ReplicaSets and custom
resources are all read and written the same way (as Kubernetes' scale client does).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from promscaler.apidiscovery import parse_resource_list
from promscaler.kubeapi import ApiError, Kube, Obj


class ScaleError(Exception):
    """The target cannot be resolved or its scale read/written; the message says why."""


@dataclass(frozen=True, slots=True)
class ResourceRef:
    group_version: str     # "apps/v1", "v1"
    resource: str          # "deployments"
    namespaced: bool
    has_scale: bool

    def base(self, namespace: str) -> str:
        root = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        return f"{root}/namespaces/{namespace}/{self.resource}" if self.namespaced else f"{root}/{self.resource}"


@dataclass(frozen=True, slots=True)
class Scale:
    """An autoscaling/v1 Scale as read: spec/status replicas and the pod selector string."""

    replicas: int
    status_replicas: int
    selector: str
    raw: Obj


class Discovery:
    """kind -> resource per group-version, cached; a miss refetches at most every `ttl` seconds."""

    def __init__(self, kube: Kube, ttl: float = 30.0) -> None:
        self.kube = kube
        self.ttl = ttl
        self._cache: dict[str, tuple[float, dict[str, ResourceRef]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def _fetch(self, group_version: str) -> dict[str, ResourceRef]:
        path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        body = await self.kube.get(path)
        return {r.kind: ResourceRef(group_version, r.name, r.namespaced, "scale" in r.subresources)
                for r in parse_resource_list(body, group_version)}

    async def resolve(self, api_version: str, kind: str) -> ResourceRef:
        group_version = api_version or "v1"
        lock = self._locks.setdefault(group_version, asyncio.Lock())
        async with lock:
            cached = self._cache.get(group_version)
            now = time.monotonic()
            if cached is None or (kind not in cached[1] and now - cached[0] > self.ttl):
                try:
                    self._cache[group_version] = cached = (now, await self._fetch(group_version))
                except ApiError as exc:
                    if exc.not_found:
                        raise ScaleError(f"no API group version {group_version!r} on the server") from None
                    raise ScaleError(f"discovery of {group_version} failed: {exc}") from None
        ref = cached[1].get(kind)
        if ref is None:
            raise ScaleError(f"no resource of kind {kind!r} in {group_version}")
        return ref


class ScaleClient:
    def __init__(self, kube: Kube, discovery: Discovery) -> None:
        self.kube = kube
        self.discovery = discovery

    async def _path(self, namespace: str, target: dict[str, Any]) -> str:
        ref = await self.discovery.resolve(target.get("apiVersion", ""), target.get("kind", ""))
        if not ref.has_scale:
            raise ScaleError(f"{target.get('kind')} in {ref.group_version} has no scale subresource")
        return f"{ref.base(namespace)}/{target.get('name', '')}/scale"

    async def get(self, namespace: str, target: dict[str, Any]) -> Scale:
        path = await self._path(namespace, target)
        try:
            raw = await self.kube.get(path)
        except ApiError as exc:
            raise ScaleError(f"{exc.reason}: {exc.message}") from None
        return _scale(raw)

    async def update(self, namespace: str, target: dict[str, Any], scale: Scale, replicas: int) -> Scale:
        """Write spec.replicas on the scale read earlier (its resourceVersion guards the write)."""
        path = await self._path(namespace, target)
        body = {**scale.raw, "spec": {**(scale.raw.get("spec") or {}), "replicas": replicas}}
        try:
            raw = await self.kube.request("PUT", path, body=body)
        except ApiError as exc:
            raise ScaleError(f"{exc.reason}: {exc.message}") from None
        return _scale(raw)


def _scale(raw: Obj) -> Scale:
    spec, status = raw.get("spec") or {}, raw.get("status") or {}
    return Scale(
        int(spec.get("replicas") or 0), int(status.get("replicas") or 0), str(status.get("selector") or ""), raw
    )
