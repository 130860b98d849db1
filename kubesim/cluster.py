"""The cluster's state and the API semantics on top of the store: defaults, the status and scale
subresources, patches, CRD registration, namespace auto-creation and garbage collection.

Shared by the HTTP routes and the `KubeSim` Python API; synchronous and thread-safe (the store
holds the lock), so no awaits happen in the middle of a write.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Callable
from typing import Any

from kubesim.admission import admit
from kubesim.fields import Filter, get_path, set_path
from kubesim.patch import apply_patch
from kubesim.resources import HORIZONTAL_AUTOSCALER_CRD, Registry, ResourceType, crd_types
from kubesim.store import Store, copy, not_found, now
from promscaler.selectors import SelectorError, from_label_selector
from promscaler.status import BadRequest, Invalid, NotFound

__all__ = ["Cluster", "scale_of"]

Obj = dict[str, Any]
CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
NODE_NAME = "kubesim-node"


def node(name: str) -> Obj:
    """The one node every pod runs on."""
    at = now()
    resources = {"cpu": "8", "memory": "32Gi", "pods": "1000"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
        "spec": {},
        "status": {"capacity": resources, "allocatable": resources,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubesim",
                                   "lastHeartbeatTime": at, "lastTransitionTime": at}],
                   "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}],
                   "nodeInfo": {"kubeletVersion": "v1.31.0-kubesim", "architecture": "amd64",
                                "operatingSystem": "linux",
                                "bootID": "", "containerRuntimeVersion": "kubesim://1", "kernelVersion": "",
                                "kubeProxyVersion": "", "machineID": "", "osImage": "kubesim", "systemUUID": ""}},
    }


def scale_of(t: ResourceType, obj: Obj) -> Obj:
    """The autoscaling/v1 Scale view of a scalable object; `status.selector` in string form."""
    assert t.scale is not None
    meta = obj["metadata"]
    status: Obj = {"replicas": int(get_path(obj, t.scale.status_replicas) or 0)}
    sel = get_path(obj, t.scale.label_selector) if t.scale.label_selector else None
    if isinstance(sel, dict):
        try:
            sel = str(from_label_selector(sel))
        except SelectorError:
            sel = None
    if sel:
        status["selector"] = sel
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                          "creationTimestamp") if k in meta},
        "spec": {"replicas": int(get_path(obj, t.scale.spec_replicas) or 0)},
        "status": status,
    }


def _check_replicas(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Invalid(f"Scale is invalid: spec.replicas: Invalid value: {value!r}: must be a non-negative integer",
                      {"kind": "Scale"})
    return value


class Cluster:
    def __init__(self, history: int = 10_000, strict_namespaces: bool = False, metrics: bool = True,
                 hpa_generation: bool = True) -> None:
        self.store = Store(history)
        self.registry = Registry.default(metrics, hpa_generation)
        self.strict_namespaces = strict_namespaces
        for ns in SYSTEM_NAMESPACES:
            self.create(self.type("v1", "Namespace"), {"metadata": {"name": ns}})
        self.create(self.type("v1", "Node"), node(NODE_NAME), keep_status=True)
        self.apply(copy(HORIZONTAL_AUTOSCALER_CRD))

    # --- lookups ---------------------------------------------------------------------------

    def type(self, api_version: str, kind: str) -> ResourceType:
        t = self.registry.by_kind(api_version, kind)
        if t is None:
            raise NotFound(f'no kind "{kind}" is registered for version "{api_version}"')
        return t

    def get(self, t: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.get(t, namespace, name)
        if obj is None:
            raise not_found(t, name)
        return obj

    def list(self, t: ResourceType, flt: Filter | None = None) -> tuple[list[Obj], int]:
        return self.store.list(t, flt)

    # --- writes ----------------------------------------------------------------------------

    def create(self, t: ResourceType, obj: Obj, namespace: str | None = None, keep_status: bool = False) -> Obj:
        """POST semantics; `keep_status` (the Python API) stores a given status as is."""
        if not isinstance(obj, dict):
            raise BadRequest(f"body of a {t.kind} must be a JSON object")
        self._check_type(t, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise BadRequest("metadata must be an object")
        if t.namespaced:
            ns = meta.get("namespace") or namespace or "default"
            if namespace and meta.get("namespace") and meta["namespace"] != namespace:
                raise BadRequest("the namespace of the provided object does not match "
                                 "the namespace sent on the request")
            meta["namespace"] = ns
            self._ensure_namespace(ns)
        obj["apiVersion"], obj["kind"] = t.api_version, t.kind
        if t.status and not keep_status:
            obj.pop("status", None)
        self._defaults(t, obj)
        if t.crd is not None:
            admit(t.crd, t.version, obj)
        out = self.store.create(t, obj)
        self._after_write(t, out)
        return out

    def replace(self, t: ResourceType, namespace: str, name: str, obj: Obj, subresource: str | None = None,
                keep_status: bool = False) -> Obj:
        """PUT semantics on the object or its `status` subresource."""
        if not isinstance(obj, dict):
            raise BadRequest(f"body of a {t.kind} must be a JSON object")
        self._check_type(t, obj)

        def change(cur: Obj) -> Obj:
            return self._admitted(t, _written(t, cur, copy(obj), subresource, keep_status), subresource)

        out = self.store.update(t, namespace, name, change)
        self._after_write(t, out)
        return out

    def patch(self, t: ResourceType, namespace: str, name: str, content_type: str, body: Any,
              subresource: str | None = None) -> Obj:
        def change(cur: Obj) -> Obj:
            patched = apply_patch(content_type, copy(cur), body, strategic=not t.custom)
            if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
                raise Invalid(f"{t.kind} is invalid: the patch removed metadata")
            return self._admitted(t, _written(t, cur, patched, subresource), subresource)

        out = self.store.update(t, namespace, name, change)
        self._after_write(t, out)
        return out

    def update_scale(self, t: ResourceType, namespace: str, name: str, scale_body: Obj | None = None,
                     content_type: str | None = None, patch_body: Any = None) -> Obj:
        """PUT (`scale_body`) or PATCH (`content_type`, `patch_body`) on `/scale`; returns the new Scale."""
        scale = t.scale
        if scale is None:
            raise NotFound(f"{t.plural} have no scale subresource")

        def change(cur: Obj) -> Obj:
            if scale_body is not None:
                if not isinstance(scale_body, dict):
                    raise BadRequest("body of a Scale must be a JSON object")
                wanted = scale_body
            else:
                wanted = apply_patch(content_type or "", scale_of(t, cur), patch_body, strategic=not t.custom)
            replicas = _check_replicas((wanted.get("spec") or {}).get("replicas"))
            set_path(cur, scale.spec_replicas, replicas)
            cur["metadata"]["resourceVersion"] = (wanted.get("metadata") or {}).get("resourceVersion")
            return cur

        out = self.store.update(t, namespace, name, change)
        return scale_of(t, out)

    def apply(self, obj: Obj) -> Obj:
        """Create or replace, status included (the privileged Python API used by tests and the demo)."""
        t = self.type(obj.get("apiVersion", ""), obj.get("kind", ""))
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "default") if t.namespaced else ""
        if meta.get("name") and self.store.get(t, ns, meta["name"]) is not None:
            body = copy(obj)
            body.setdefault("metadata", {}).pop("resourceVersion", None)
            return self.replace(t, ns, meta["name"], body, keep_status=True)
        return self.create(t, copy(obj), ns or None, keep_status=True)

    def update_status(self, t: ResourceType, namespace: str, name: str, mutate: Callable[[Obj], None]) -> Obj:
        """Change an object's status in place on a copy (controllers)."""
        def change(cur: Obj) -> Obj:
            mutate(cur)
            cur["metadata"].pop("resourceVersion", None)
            return cur
        return self.store.update(t, namespace, name, change)

    def delete(self, t: ResourceType, namespace: str, name: str, uid: str | None = None,
               resource_version: str | None = None) -> Obj:
        gone = self.store.delete(t, namespace, name, uid, resource_version)
        self._after_delete(t, gone)
        return gone

    # --- semantics -------------------------------------------------------------------------

    def _check_type(self, t: ResourceType, obj: Obj) -> None:
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != t.kind:
            raise BadRequest(f"the kind of the provided object ({kind}) does not match the resource ({t.kind})")
        if api_version and api_version.rpartition("/")[0] != t.group:
            raise BadRequest(f"the apiVersion of the provided object ({api_version}) "
                             f"is not in group {t.group or 'core'!r}")

    @staticmethod
    def _admitted(t: ResourceType, obj: Obj, subresource: str | None) -> Obj:
        """A custom resource's main-resource write goes through its CRD's defaulting and validation."""
        if t.crd is not None and subresource is None:
            admit(t.crd, t.version, obj)
        return obj

    def _ensure_namespace(self, ns: str) -> None:
        t = self.registry.by_kind("v1", "Namespace")
        assert t is not None
        if self.store.get(t, "", ns) is None:
            if self.strict_namespaces:
                raise NotFound(f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"})
            with contextlib.suppress(Exception):  # created concurrently
                self.store.create(t, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                                      "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})

    def _defaults(self, t: ResourceType, obj: Obj) -> None:
        spec = obj.get("spec")
        if t.group == "apps" and isinstance(spec, dict):
            spec.setdefault("replicas", 1)
        if t.kind == "Namespace":
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj.setdefault("status", {"phase": "Active"})
        if t.key == CRD_KEY:
            names = (spec or {}).get("names") or {}
            obj["status"] = {
                "acceptedNames": names,
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "lastTransitionTime": now(),
                     "message": "no conflicts found"},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                     "lastTransitionTime": now(),
                     "message": "the initial names have been accepted"},
                ],
                "storedVersions": [v["name"] for v in (spec or {}).get("versions") or [] if v.get("storage")],
            }

    def _after_write(self, t: ResourceType, obj: Obj) -> None:
        if t.key == CRD_KEY:
            rows = crd_types(obj)
            if rows:
                self.registry.remove_group_plural(rows[0].group, rows[0].plural)
                self.registry.add(rows)

    def _after_delete(self, t: ResourceType, gone: Obj) -> None:
        """Cascade like the namespace controller and the garbage collector (foreground, at once)."""
        if t.key == CRD_KEY:
            spec = gone.get("spec") or {}
            self.registry.remove_group_plural(spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
            return
        if t.kind == "Namespace":
            ns = gone["metadata"]["name"]
            for other in list(self.registry.types.values()):
                if other.namespaced:
                    for obj in self.store.list(other, Filter(namespace=ns))[0]:
                        self._quiet_delete(other, obj)
            return
        if t.kind in ("Pod", "Event", "Lease"):
            return
        uid = gone["metadata"].get("uid")
        ns = gone["metadata"].get("namespace")
        for other in self._dependent_types():
            for obj in self.store.list(other, Filter(namespace=ns))[0]:
                if any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or ()):
                    self._quiet_delete(other, obj)

    def _dependent_types(self) -> builtins.list[ResourceType]:
        seen, out = set(), []
        for t in self.registry.types.values():
            if t.namespaced and t.key not in seen and t.kind not in ("Event", "Lease"):
                seen.add(t.key)
                out.append(t)
        return out

    def _quiet_delete(self, t: ResourceType, obj: Obj) -> None:
        with contextlib.suppress(NotFound):
            self.delete(t, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def _written(t: ResourceType, cur: Obj, incoming: Obj, subresource: str | None, keep_status: bool = False) -> Obj:
    """The object a PUT or PATCH leaves: on the status subresource only the status (and the
    resourceVersion that guards the write) changes; on the main resource everything but the status,
    as for any resource with a status subresource."""
    if subresource == "status":
        new = {**cur, "status": incoming.get("status")}
        new["metadata"] = {**cur["metadata"],
                           "resourceVersion": (incoming.get("metadata") or {}).get("resourceVersion")}
    else:
        new = incoming
        new.setdefault("metadata", {})
        if t.status and not keep_status:
            new["status"] = cur.get("status")
    if new.get("status") is None:
        new.pop("status", None)
    new["apiVersion"], new["kind"] = t.api_version, t.kind
    return new
