"""Kubernetes API discovery documents -> typed resource entries (pure; the callers do the I/O).

Legacy discovery: `/api/v1` and `/apis/<group>/<version>` answer an APIResourceList; `/apis` an
APIGroupList. Aggregated discovery (apidiscovery.k8s.io/v2, kube-apiserver 1.30+): `/api` and
`/apis` asked with `AGGREGATED_ACCEPT` answer an APIGroupDiscoveryList holding every group,
version and resource; a server without it answers the legacy document instead (told apart by
the answer's kind, `is_aggregated`). The controller's scale client and the adapter's resource
table both read them here, so "which resource is this kind, is it namespaced, does it have
/scale" has one answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["AGGREGATED_ACCEPT", "AGGREGATED_TYPE", "APIResource", "PreferredVersion", "is_aggregated",
           "parse_resource_list", "preferred_group_versions", "preferred_versions"]

AGGREGATED_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
# the aggregated form first, else the legacy document (content negotiation, as client-go asks)
AGGREGATED_ACCEPT = f"{AGGREGATED_TYPE},application/json"


@dataclass(frozen=True, slots=True)
class APIResource:
    """One top-level resource of a group version, with the names of its subresources."""

    group: str                 # "" for the core group
    version: str               # "v1", "v1alpha1"
    name: str                  # the plural: "pods", "rollouts"
    singular: str              # "pod"; the lower-cased kind when the server leaves it empty
    kind: str                  # "Pod"
    namespaced: bool
    subresources: frozenset[str] = frozenset()  # "status", "scale", ...
    verbs: tuple[str, ...] = ()

    @property
    def group_version(self) -> str:
        """`v1` for the core group, else `<group>/<version>`."""
        return f"{self.group}/{self.version}" if self.group else self.version


def _split(group_version: str) -> tuple[str, str]:
    group, _, version = group_version.rpartition("/")
    return group, version


def parse_resource_list(doc: Mapping[str, Any], group_version: str | None = None) -> list[APIResource]:
    """The resources of an APIResourceList in document order; `x/y` entries are not resources
    of their own but record subresource `y` of `x`. Entries without a kind are skipped.
    `group_version` (`v1`, `apps/v1`) defaults to the document's `groupVersion`."""
    gv = group_version or str(doc.get("groupVersion") or "v1")
    group, version = _split(gv)
    entries = [r for r in doc.get("resources") or () if isinstance(r, Mapping)]
    subresources: dict[str, set[str]] = {}
    for r in entries:
        parent, slash, sub = str(r.get("name") or "").partition("/")
        if slash:
            subresources.setdefault(parent, set()).add(sub)
    out = []
    for r in entries:
        name, kind = str(r.get("name") or ""), str(r.get("kind") or "")
        if "/" in name or not name or not kind:
            continue
        out.append(APIResource(group, version, name, str(r.get("singularName") or "") or kind.lower(), kind,
                               bool(r.get("namespaced")), frozenset(subresources.get(name, ())),
                               tuple(str(v) for v in r.get("verbs") or ())))
    return out


def preferred_group_versions(doc: Mapping[str, Any]) -> list[str]:
    """`apps/v1`, ...: each group's preferred version (else its first) from an APIGroupList, in order."""
    out = []
    for g in doc.get("groups") or ():
        if not isinstance(g, Mapping):
            continue
        preferred = (g.get("preferredVersion") or {}).get("groupVersion")
        versions = [v.get("groupVersion") for v in g.get("versions") or () if isinstance(v, Mapping)]
        gv = preferred or next((v for v in versions if v), None)
        if gv:
            out.append(str(gv))
    return out


def is_aggregated(doc: Mapping[str, Any]) -> bool:
    """An APIGroupDiscoveryList (apidiscovery.k8s.io/v2), as opposed to a legacy document."""
    return doc.get("kind") == "APIGroupDiscoveryList" and doc.get("apiVersion") == "apidiscovery.k8s.io/v2"


@dataclass(frozen=True, slots=True)
class PreferredVersion:
    """A group's preferred version from aggregated discovery. `stale`: an aggregated API whose
    discovery failed; its resources (if any) are not current."""

    group: str
    version: str
    resources: tuple[APIResource, ...]
    stale: bool = False

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def preferred_versions(doc: Mapping[str, Any]) -> list[PreferredVersion]:
    """Each group's preferred version (versions are listed in preference order) with its
    resources, in document order, from an APIGroupDiscoveryList. Resources without a kind
    (`responseKind`) are skipped, as in `parse_resource_list`."""
    out = []
    for item in doc.get("items") or ():
        if not isinstance(item, Mapping):
            continue
        group = str((item.get("metadata") or {}).get("name") or "")
        versions = [v for v in item.get("versions") or () if isinstance(v, Mapping) and v.get("version")]
        if not versions:
            continue
        version = str(versions[0]["version"])
        resources = []
        for r in versions[0].get("resources") or ():
            response = r.get("responseKind") if isinstance(r, Mapping) else None
            if not isinstance(response, Mapping):
                continue
            name, kind = str(r.get("resource") or ""), str(response.get("kind") or "")
            if not name or not kind:
                continue
            subresources = frozenset(str(s.get("subresource")) for s in r.get("subresources") or ()
                                     if isinstance(s, Mapping) and s.get("subresource"))
            resources.append(APIResource(group, version, name, str(r.get("singularResource") or "") or kind.lower(),
                                         kind, r.get("scope") == "Namespaced", subresources,
                                         tuple(str(v) for v in r.get("verbs") or ())))
        out.append(PreferredVersion(group, version, tuple(resources), versions[0].get("freshness") == "Stale"))
    return out
