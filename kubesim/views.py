"""Presentations of stored objects that clients ask for besides the objects themselves: the
`meta.k8s.io` Table kubectl prints, and a permissive OpenAPI v3 document kubectl validates
manifests against before applying them."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import orjson

from kubesim.resources import Registry, ResourceType
from promscaler.kubeversion import CURRENT, KubeVersion, parse_kube_version
from promscaler.status import NotFound
from promscaler.times import parse_time

__all__ = ["KUBE_VERSION", "openapi_document", "openapi_index", "parse_version", "table", "version_info"]

Obj = dict[str, Any]
KUBE_VERSION = str(CURRENT)  # the release a KubeSim serves unless told another: the one promscaler decides as


def parse_version(text: str) -> KubeVersion:
    """`1.36` -> (1, 36), as `parse_kube_version` reads it; ValueError naming the value otherwise."""
    try:
        return parse_kube_version(text)
    except ValueError:
        raise ValueError(f"kube_version: want MAJOR.MINOR such as 1.36, got {text!r}") from None


def version_info(version: tuple[int, int]) -> Obj:
    """What `/version` answers (version.Info) for a cluster of `version`."""
    major, minor = version
    return {"major": str(major), "minor": str(minor), "gitVersion": f"v{major}.{minor}.0-kubesim",
            "gitCommit": "kubesim", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.22", "compiler": "gc", "platform": "linux/amd64"}


def _age(ts: str | None) -> str:
    if not ts:
        return "<unknown>"
    s = int((datetime.now(UTC) - parse_time(ts)).total_seconds())
    if s < 120:
        return f"{max(s, 0)}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def _pod_cells(o: Obj) -> list[Any]:
    st = o.get("status") or {}
    n = len((o.get("spec") or {}).get("containers") or [])
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])
    return [f"{n if ready else 0}/{n}", st.get("phase", "Pending"), 0]


def _deploy_cells(o: Obj) -> list[Any]:
    st, spec = o.get("status") or {}, o.get("spec") or {}
    return [f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 0)}", st.get("updatedReplicas", 0),
            st.get("availableReplicas", 0)]


_COLUMNS: dict[str, tuple[list[tuple[str, str]], Any]] = {
    "Pod": ([("Ready", "string"), ("Status", "string"), ("Restarts", "integer")], _pod_cells),
    "Deployment": ([("Ready", "string"), ("Up-to-date", "integer"), ("Available", "integer")], _deploy_cells),
}


def _json_path(obj: Any, path: str) -> Any:
    """A CRD printer column's simple JSONPath (`.status.currentReplicas`, `.spec.items[0].name`)."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            i = int(part[1:-1])
            obj = obj[i] if isinstance(obj, list) and i < len(obj) else None
        else:
            obj = obj.get(part) if isinstance(obj, dict) else None
        if obj is None:
            return None
    return obj


def _crd_columns(t: ResourceType) -> list[Obj] | None:
    for v in (t.crd or {}).get("spec", {}).get("versions") or ():
        if v.get("name") == t.version and v.get("additionalPrinterColumns"):
            return list(v["additionalPrinterColumns"])
    return None


def _crd_table(columns: list[Obj], items: list[Obj], list_meta: Obj) -> Obj:
    """The apiextensions server's Table: Name, then the CRD's printer columns; a `date` column is
    printed as an age, a missing value is a null cell (kubectl shows <none>)."""
    def cell(o: Obj, c: Obj) -> Any:
        value = _json_path(o, c["jsonPath"])
        if value is None:
            return None
        if c.get("type") == "date":
            return _age(value)
        if c.get("type") == "integer" and not isinstance(value, bool) and isinstance(value, int | float):
            return int(value)
        return value if isinstance(value, str | int | float | bool) else orjson.dumps(value).decode()

    defs = [{"name": "Name", "type": "string", "format": "name",
             "description": "Name must be unique within a namespace.", "priority": 0}]
    defs += [{"name": c["name"], "type": c.get("type", "string"), "format": c.get("format", ""),
              "description": c.get("description", ""), "priority": c.get("priority", 0)} for c in columns]
    return {
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": defs,
        "rows": [{"cells": [o["metadata"]["name"], *(cell(o, c) for c in columns)],
                  "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": o["metadata"]}}
                 for o in items],
    }


def table(t: ResourceType, items: list[Obj], list_meta: Obj) -> Obj:
    crd_columns = _crd_columns(t)
    if crd_columns:
        return _crd_table(crd_columns, items, list_meta)
    extra, cells = _COLUMNS.get(t.kind, ([], lambda o: []))
    cols = [("Name", "string"), *extra, ("Age", "string")]
    return {
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
        "columnDefinitions": [{"name": n, "type": ty, "format": "name" if n == "Name" else "", "description": n,
                               "priority": 0} for n, ty in cols],
        "rows": [{"cells": [o["metadata"]["name"], *cells(o), _age(o["metadata"].get("creationTimestamp"))],
                  "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": o["metadata"]}}
                 for o in items],
    }


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_index(registry: Registry, hash_: int) -> Obj:
    pairs = sorted({(t.group, t.version) for t in list(registry.types.values())})
    return {"paths": {_gv_path(g, v): {"serverRelativeURL": f"/openapi/v3/{_gv_path(g, v)}?hash={hash_}"}
                      for g, v in pairs}}


def openapi_document(registry: Registry, path: str, release: tuple[int, int]) -> Obj:
    """A permissive OpenAPI v3 document for one group/version: every kind accepts any fields
    (the sandbox does no schema validation), which is what kubectl needs to apply manifests."""
    parts = path.strip("/").split("/")
    group, version = ("", parts[1]) if parts[0] == "api" and len(parts) == 2 else (
        (parts[1], parts[2]) if parts[0] == "apis" and len(parts) == 3 else (None, None))
    rows = registry.in_group_version(group, version) if group is not None and version is not None else []
    if not rows:
        raise NotFound("the server could not find the requested resource")
    schemas, paths = {}, {}
    for t in rows:
        gvk = {"group": t.group, "version": t.version, "kind": t.kind}
        base = f"/{path.strip('/')}" + ("/namespaces/{namespace}" if t.namespaced else "") + f"/{t.plural}"
        ops = {verb: {"x-kubernetes-action": verb, "x-kubernetes-group-version-kind": gvk, "responses": {},
                      "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}]}
               for verb in ("patch", "put")}
        paths[base + "/{name}"] = ops
        paths[base] = {"post": {**ops["put"], "x-kubernetes-action": "post"}}
        schemas[f"{t.group or 'core'}.{t.version}.{t.kind}"] = {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True,
            "x-kubernetes-group-version-kind": [{"group": t.group, "version": t.version, "kind": t.kind}],
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                           "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": version_info(release)["gitVersion"]},
            "paths": paths,
            "components": {"schemas": schemas}}
