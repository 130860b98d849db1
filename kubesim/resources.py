"""The table of resources the sandbox API server serves: one row per resource, no per-resource code.

Built-in rows mirror kube-apiserver's; a CustomResourceDefinition stored in the sandbox adds rows
for its served versions, as the apiextensions server does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from importlib.resources import files
from typing import Any

import yaml

__all__ = ["BUILTIN", "HORIZONTAL_AUTOSCALER_CRD", "METRICS", "Registry", "ResourceType", "ScaleSpec", "crd_types"]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ScaleSpec:
    """Where a resource keeps the fields of its `/scale` view (JSON paths as in a CRD)."""

    spec_replicas: str = ".spec.replicas"
    status_replicas: str = ".status.replicas"
    label_selector: str | None = ".spec.selector"  # a LabelSelector object or a selector string


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str  # "" for core
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status: bool = False  # has the /status subresource
    scale: ScaleSpec | None = None  # has the /scale subresource
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    generation: bool = False  # metadata.generation counts spec changes
    singular: str = ""
    custom: bool = False  # served from a CustomResourceDefinition (no strategic merge patch)
    crd: Any = field(default=None, compare=False, hash=False, repr=False)  # its CRD: schema, printer columns

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: one store per group and plural, shared by all versions."""
        return (self.group, self.plural)

    def discovery(self) -> list[dict[str, Any]]:
        """APIResource entries of this resource and its subresources."""
        main: dict[str, Any] = {
            "name": self.plural, "singularName": self.singular or self.kind.lower(), "namespaced": self.namespaced,
            "kind": self.kind, "verbs": list(self.verbs),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        out = [main]
        if self.status:
            out.append({"name": f"{self.plural}/status", "singularName": "", "namespaced": self.namespaced,
                        "kind": self.kind, "verbs": ["get", "patch", "update"]})
        if self.scale:
            out.append({"name": f"{self.plural}/scale", "singularName": "", "namespaced": self.namespaced,
                        "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]})
        return out


_APPS_SCALE = ScaleSpec()

BUILTIN: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", namespaced=False, status=True, short_names=("ns",),
                 verbs=("create", "delete", "get", "list", "patch", "update", "watch")),
    ResourceType("", "v1", "pods", "Pod", status=True, short_names=("po",), categories=("all",)),
    ResourceType("", "v1", "events", "Event", short_names=("ev",)),
    ResourceType("", "v1", "configmaps", "ConfigMap", short_names=("cm",)),
    ResourceType("", "v1", "secrets", "Secret"),
    ResourceType("", "v1", "services", "Service", status=True, short_names=("svc",), categories=("all",)),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",)),
    ResourceType("", "v1", "endpoints", "Endpoints", short_names=("ep",)),
    ResourceType("", "v1", "nodes", "Node", namespaced=False, status=True, short_names=("no",)),
    ResourceType("apps", "v1", "deployments", "Deployment", status=True, scale=_APPS_SCALE, short_names=("deploy",),
                 categories=("all",), generation=True),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", status=True, scale=_APPS_SCALE, short_names=("rs",),
                 categories=("all",), generation=True),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", status=True, scale=_APPS_SCALE, short_names=("sts",),
                 categories=("all",), generation=True),
    ResourceType("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", status=True,
                 short_names=("hpa",), categories=("all",), generation=True),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", status=True, short_names=("pdb",),
                 generation=True),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease"),
    ResourceType("events.k8s.io", "v1", "events", "Event", short_names=("ev",)),
    ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
                 namespaced=False, status=True, short_names=("crd", "crds"), generation=True),
    ResourceType("apiregistration.k8s.io", "v1", "apiservices", "APIService", namespaced=False, status=True),
    ResourceType("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False, verbs=("create",)),
    ResourceType("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False,
                 verbs=("create",)),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
)

# metrics-server's aggregated API, served from `KubeSim.set_pod_usage`.
METRICS: tuple[ResourceType, ...] = (
    ResourceType("metrics.k8s.io", "v1beta1", "pods", "PodMetrics", verbs=("get", "list")),
    ResourceType("metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", namespaced=False, verbs=("get", "list")),
)

# promscaler's own CRD, installed in every sandbox (the controller's HorizontalAutoscaler): the
# manifest a real API server is given (names, versions, subresources, printer columns), with each
# version's schema left open so that tests may store partial objects; tests of admission apply the
# manifest itself. Read at import, so a regenerated manifest (new fields, columns) needs no change here.
CRD_MANIFEST = files("apiservice") / "horizontalautoscaler-crd.yaml"


def _open_schema(crd: dict[str, Any]) -> dict[str, Any]:
    for v in crd["spec"]["versions"]:
        v["schema"] = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return crd


# The C loader where PyYAML has it: the 80 KB manifest took ~0.2 s with the pure-Python one.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
HORIZONTAL_AUTOSCALER_CRD: dict[str, Any] = _open_schema(
    yaml.load(CRD_MANIFEST.read_text(encoding="utf-8"), Loader=_LOADER))


def crd_types(crd: Mapping[str, Any]) -> list[ResourceType]:
    """The resource rows a CustomResourceDefinition declares (one per served version)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
    if not (group and plural and kind):
        return []
    out = []
    for v in spec.get("versions") or []:
        if not v.get("served", True):
            continue
        sub = v.get("subresources") or {}
        scale = None
        if "scale" in sub:
            s = sub["scale"] or {}
            scale = ScaleSpec(
                s.get("specReplicasPath", ".spec.replicas"),
                s.get("statusReplicasPath", ".status.replicas"),
                s.get("labelSelectorPath"),
            )
        out.append(
            ResourceType(
                group,
                v["name"],
                plural,
                kind,
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                status="status" in sub,
                scale=scale,
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                generation=True,
                singular=names.get("singular", ""),
                custom=True,
                crd=crd,
            )
        )
    return out


@dataclass
class Registry:
    """Lookup of resource rows by (group, version, plural) and by (apiVersion, kind)."""

    types: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)
    builtin: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def default(cls, metrics: bool = True, hpa_generation: bool = True) -> Registry:
        """The built-in kinds; `hpa_generation` off: HorizontalPodAutoscalers get no
        metadata.generation, as before Kubernetes 1.37 (kubernetes#138228)."""
        rows = BUILTIN + (METRICS if metrics else ())
        if not hpa_generation:
            rows = tuple(replace(t, generation=False) if t.kind == "HorizontalPodAutoscaler" else t for t in rows)
        reg = cls()
        reg.add(rows)
        reg.builtin = frozenset(t.key for t in rows)
        return reg

    def add(self, rows: Iterable[ResourceType]) -> None:
        for t in rows:
            self.types[(t.group, t.version, t.plural)] = t

    def remove_group_plural(self, group: str, plural: str) -> None:
        if (group, plural) in self.builtin:
            return
        for k in [k for k in self.types if k[0] == group and k[2] == plural]:
            del self.types[k]

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.types.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        for t in list(self.types.values()):
            if t.group == group and t.version == version and t.kind == kind:
                return t
        return None

    def groups(self) -> dict[str, list[str]]:
        """group -> served versions, preferred (first registered) first."""
        out: dict[str, list[str]] = {}
        for t in list(self.types.values()):
            versions = out.setdefault(t.group, [])
            if t.version not in versions:
                versions.append(t.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [t for t in list(self.types.values()) if t.group == group and t.version == version]
