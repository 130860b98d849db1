"""Aggregated discovery (apidiscovery.k8s.io/v2): `/api` and `/apis` answer every group, version
and resource in one document when the client's Accept list asks for it first, as kube-apiserver
does (client-go and kubectl ask by default). The documents are converted from the same
APIResourceList entries the legacy `/api/v1` and `/apis/<group>/<version>` serve, the way
kube-aggregator converts a backend that only serves legacy discovery, so both forms always agree.

An APIService's versions are read from its backend when asked (its `/apis` in the aggregated form,
else each version's legacy list); a version whose backend does not answer is listed with no
resources and `"freshness": "Stale"`, as kube-aggregator lists it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["group_discovery", "group_discovery_list", "version_discovery", "wants_aggregated"]

Obj = dict[str, Any]

_AGGREGATED_PARAMS = {"g": "apidiscovery.k8s.io", "v": "v2", "as": "APIGroupDiscoveryList"}


def wants_aggregated(accept: str | None) -> bool:
    """Content negotiation on the Accept list, in its order: True when the first media type this
    server can answer is the aggregated v2 JSON; False for plain JSON, `*/*` or no Accept (the
    legacy documents). Other forms (protobuf, v2beta1) are passed over, as a server without them does."""
    for part in (accept or "").split(","):
        media, *raw = (p.strip() for p in part.split(";"))
        params = dict(p.split("=", 1) for p in raw if "=" in p)
        if params.pop("q", None) in ("0", "0.0", "0.00", "0.000"):
            continue
        if media not in ("application/json", "application/*", "*/*"):
            continue
        if not params:
            return False
        if params == _AGGREGATED_PARAMS and media == "application/json":
            return True
    return False


def version_discovery(group: str, version: str, resources: Iterable[Mapping[str, Any]],
                      fresh: bool = True) -> Obj:
    """APIVersionDiscovery from APIResourceList entries, converted as kube-aggregator converts a
    backend's legacy list: `x/y` entries become subresource `y` of `x`; an entry's kind without a
    group and version is of this group version."""
    top: dict[str, Obj] = {}
    subs: list[tuple[str, str, Mapping[str, Any]]] = []
    for r in resources:
        parent, slash, sub = str(r.get("name") or "").partition("/")
        if slash:
            subs.append((parent, sub, r))
            continue
        entry: Obj = {"resource": parent, "responseKind": _kind(group, version, r),
                      "scope": "Namespaced" if r.get("namespaced") else "Cluster",
                      "singularResource": r.get("singularName") or "", "verbs": list(r.get("verbs") or ())}
        for field in ("shortNames", "categories"):  # omitted when empty, as kube-apiserver does
            if r.get(field):
                entry[field] = list(r[field])
        top[parent] = entry
    for parent, sub, r in subs:
        if parent not in top:  # as kube-aggregator: a placeholder parent without a kind (custom metrics' `pods/m`)
            top[parent] = {"resource": parent, "responseKind": {"group": "", "version": "", "kind": ""},
                           "scope": "Namespaced" if r.get("namespaced") else "Cluster"}
        top[parent].setdefault("subresources", []).append(
            {"subresource": sub, "responseKind": _kind(group, version, r), "verbs": list(r.get("verbs") or ())})
    return {"version": version, "resources": list(top.values()), "freshness": "Current" if fresh else "Stale"}


def _kind(group: str, version: str, r: Mapping[str, Any]) -> Obj:
    if r.get("group") or r.get("version"):
        return {"group": r.get("group") or "", "version": r.get("version") or "", "kind": r.get("kind") or ""}
    return {"group": group, "version": version, "kind": r.get("kind") or ""}


def group_discovery(group: str, versions: Iterable[Obj]) -> Obj:
    """APIGroupDiscovery; `versions` in preference order (the first is the preferred one). The
    core group has no name (kube-apiserver omits the empty one)."""
    return {"metadata": {"name": group} if group else {}, "versions": list(versions)}


def group_discovery_list(groups: Iterable[Obj]) -> Obj:
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
            "items": list(groups)}
