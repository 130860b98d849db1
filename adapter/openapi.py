"""Small static OpenAPI documents for the aggregator (`/openapi/v2`, `/openapi/v3`).

kube-apiserver downloads them to merge into its own; they only need to be valid and to
describe the served groups' paths and kinds: custom and external metrics' value lists, and
metrics.k8s.io's PodMetrics and NodeMetrics (with their lists) when resourceRules are served.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from promscaler.wire import (
    CUSTOM_GROUP,
    CUSTOM_VERSIONS,
    EXTERNAL_GROUP,
    EXTERNAL_VERSIONS,
    RESOURCE_GROUP,
    RESOURCE_VERSIONS,
)

__all__ = ["group_versions", "openapi_v2", "openapi_v3_document", "openapi_v3_index"]

_INFO = {"title": "promscaler-adapter", "version": "v0.1.0"}
GroupVersions = list[tuple[str, str]]


def group_versions(custom: bool = True, external: bool = True, resource: bool = False) -> GroupVersions:
    """The (group, version) pairs served."""
    out = [(CUSTOM_GROUP, v) for v in CUSTOM_VERSIONS] if custom else []
    out += [(EXTERNAL_GROUP, v) for v in EXTERNAL_VERSIONS] if external else []
    return out + ([(RESOURCE_GROUP, v) for v in RESOURCE_VERSIONS] if resource else [])


_QUANTITY = {"type": "string", "description": "a Kubernetes quantity, e.g. 1500m"}
_OBJ = {"type": "object", "additionalProperties": True}
_STR = {"type": "string"}
_TIME = {"type": "string", "format": "date-time"}
_USAGE = {"type": "object", "additionalProperties": _QUANTITY, "description": "resource name -> quantity"}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    return out


_GVK = "x-kubernetes-group-version-kind"


def _kind(kind: str, version: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A metrics.k8s.io kind: `x-kubernetes-group-version-kind` names it for clients (kubectl explain)."""
    return {**schema, _GVK: [{"group": RESOURCE_GROUP, "version": version, "kind": kind}]}


def _list(item_ref: str) -> dict[str, Any]:
    return _object({"kind": _STR, "apiVersion": _STR, "metadata": _OBJ,
                    "items": {"type": "array", "items": {"$ref": item_ref}}}, ("items",))


def _schemas(group: str, version: str, ref: str) -> dict[str, Any]:
    """The kinds of one group version; `ref` is the prefix of a `$ref` in this document version."""
    if group == CUSTOM_GROUP:
        return {"MetricValueList": _object({
            "kind": _STR, "apiVersion": _STR, "metadata": _OBJ,
            "items": {"type": "array", "items": _object({
                "describedObject": _OBJ, "metricName": _STR, "metric": _OBJ, "timestamp": _TIME,
                "window": {"type": "integer"}, "windowSeconds": {"type": "integer"}, "value": _QUANTITY})}})}
    if group == EXTERNAL_GROUP:
        return {"ExternalMetricValueList": _object({
            "kind": _STR, "apiVersion": _STR, "metadata": _OBJ,
            "items": {"type": "array", "items": _object({
                "metricName": _STR, "metricLabels": {"type": "object", "additionalProperties": _STR},
                "timestamp": _TIME, "window": {"type": "integer"}, "value": _QUANTITY})}})}
    common = {"kind": _STR, "apiVersion": _STR, "metadata": _OBJ, "timestamp": _TIME,
              "window": {"type": "string", "description": "a duration, e.g. 30s"}}
    return {
        "NodeMetrics": _kind("NodeMetrics", version, _object({**common, "usage": _USAGE},
                                                             ("metadata", "timestamp", "window", "usage"))),
        "NodeMetricsList": _kind("NodeMetricsList", version, _list(f"{ref}NodeMetrics")),
        "ContainerMetrics": _object({"name": _STR, "usage": _USAGE}, ("name", "usage")),
        "PodMetrics": _kind("PodMetrics", version, _object(
            {**common, "containers": {"type": "array", "items": {"$ref": f"{ref}ContainerMetrics"}}},
            ("metadata", "timestamp", "window", "containers"))),
        "PodMetricsList": _kind("PodMetricsList", version, _list(f"{ref}PodMetrics")),
    }


def _templates(group: str, version: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """(path template, answer kind, query parameters) of one group version."""
    base = f"/apis/{group}/{version}"
    if group == CUSTOM_GROUP:
        q = ("labelSelector", "metricLabelSelector")
        return [(f"{base}/namespaces/{{namespace}}/{{resource}}/{{name}}/{{metric}}", "MetricValueList", q),
                (f"{base}/{{resource}}/{{name}}/{{metric}}", "MetricValueList", q),
                (f"{base}/namespaces/{{namespace}}/metrics/{{metric}}", "MetricValueList", q)]
    if group == EXTERNAL_GROUP:
        return [(f"{base}/namespaces/{{namespace}}/{{metric}}", "ExternalMetricValueList",
                 ("labelSelector", "metricLabelSelector"))]
    q = ("labelSelector", "fieldSelector")
    return [(f"{base}/nodes", "NodeMetricsList", q), (f"{base}/nodes/{{name}}", "NodeMetrics", ()),
            (f"{base}/pods", "PodMetricsList", q), (f"{base}/namespaces/{{namespace}}/pods", "PodMetricsList", q),
            (f"{base}/namespaces/{{namespace}}/pods/{{name}}", "PodMetrics", ())]


def _paths(group: str, version: str, v3: bool) -> dict[str, Any]:
    prefix = "#/components/schemas/" if v3 else "#/definitions/"

    def typed(schema: dict[str, Any]) -> dict[str, Any]:
        return {"schema": schema} if v3 else schema

    paths: dict[str, Any] = {}
    for template, kind, query in _templates(group, version):
        ok = ({"description": "OK", "content": {"application/json": {"schema": {"$ref": prefix + kind}}}} if v3
              else {"description": "OK", "schema": {"$ref": prefix + kind}})
        params = [{"name": p.strip("{}"), "in": "path", "required": True, **typed(_STR)}
                  for p in template.split("/") if p.startswith("{")]
        params += [{"name": q, "in": "query", **typed(_STR)} for q in query]
        paths[template] = {"get": {"operationId": f"get{kind}{len(paths)}", "parameters": params,
                                   "responses": {"200": ok}}}
    return paths


def openapi_v2(served: GroupVersions) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    definitions: dict[str, Any] = {}
    for g, v in served:
        paths.update(_paths(g, v, v3=False))
        for name, schema in _schemas(g, v, "#/definitions/").items():
            before = definitions.get(name, {}).get(_GVK)
            # one document for every version: a kind served at two (metrics.k8s.io v1 and v1beta1,
            # the same schema) names both, as kube-openapi lists a type's every group version kind
            definitions[name] = {**schema, _GVK: before + schema[_GVK]} if before and _GVK in schema else schema
    return {"swagger": "2.0", "info": _INFO, "paths": paths, "definitions": definitions}


def openapi_v3_document(group: str, version: str) -> dict[str, Any]:
    return {"openapi": "3.0.0", "info": _INFO, "paths": _paths(group, version, v3=True),
            "components": {"schemas": _schemas(group, version, "#/components/schemas/")}}


def openapi_v3_index(served: GroupVersions) -> dict[str, Any]:
    paths = {}
    for g, v in served:
        digest = hashlib.sha512(orjson.dumps(openapi_v3_document(g, v), option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]
        paths[f"apis/{g}/{v}"] = {"serverRelativeURL": f"/openapi/v3/apis/{g}/{v}?hash={digest.upper()}"}
    return {"paths": paths}
