"""Small static OpenAPI documents for the aggregator (`/openapi/v2`, `/openapi/v3`).

kube-apiserver downloads them to merge into its own; they only need to be valid and to
describe the groups' list kinds.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from promscaler.wire import CUSTOM_GROUP, CUSTOM_VERSIONS, EXTERNAL_GROUP, EXTERNAL_VERSIONS

__all__ = ["group_versions", "openapi_v2", "openapi_v3_document", "openapi_v3_index"]

_INFO = {"title": "promscaler-adapter", "version": "v0.1.0"}


def group_versions(custom: bool = True, external: bool = True) -> list[tuple[str, str]]:
    out = [(CUSTOM_GROUP, v) for v in CUSTOM_VERSIONS] if custom else []
    return out + ([(EXTERNAL_GROUP, v) for v in EXTERNAL_VERSIONS] if external else [])


def _schemas() -> dict[str, Any]:
    quantity = {"type": "string", "description": "a Kubernetes quantity, e.g. 1500m"}
    obj = {"type": "object", "additionalProperties": True}
    return {
        "MetricValueList": {"type": "object", "properties": {
            "kind": {"type": "string"}, "apiVersion": {"type": "string"}, "metadata": obj,
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "describedObject": obj, "metricName": {"type": "string"}, "metric": obj,
                "timestamp": {"type": "string", "format": "date-time"}, "window": {"type": "integer"},
                "windowSeconds": {"type": "integer"}, "value": quantity}}}}},
        "ExternalMetricValueList": {"type": "object", "properties": {
            "kind": {"type": "string"}, "apiVersion": {"type": "string"}, "metadata": obj,
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "metricName": {"type": "string"},
                "metricLabels": {"type": "object", "additionalProperties": {"type": "string"}},
                "timestamp": {"type": "string", "format": "date-time"}, "window": {"type": "integer"},
                "value": quantity}}}}},
    }


def _paths(group: str, version: str, v3: bool) -> dict[str, Any]:
    kind = "MetricValueList" if group == CUSTOM_GROUP else "ExternalMetricValueList"
    ref = f"#/components/schemas/{kind}" if v3 else f"#/definitions/{kind}"
    ok = ({"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}} if v3
          else {"description": "OK", "schema": {"$ref": ref}})
    base = f"/apis/{group}/{version}"
    templates = ([f"{base}/namespaces/{{namespace}}/{{resource}}/{{name}}/{{metric}}",
                  f"{base}/{{resource}}/{{name}}/{{metric}}",
                  f"{base}/namespaces/{{namespace}}/metrics/{{metric}}"] if group == CUSTOM_GROUP
                 else [f"{base}/namespaces/{{namespace}}/{{metric}}"])
    paths: dict[str, Any] = {}
    for t in templates:
        params = [{"name": p.strip("{}"), "in": "path", "required": True,
                   **({"schema": {"type": "string"}} if v3 else {"type": "string"})}
                  for p in t.split("/") if p.startswith("{")]
        for q in ("labelSelector", "metricLabelSelector"):
            params.append({"name": q, "in": "query", **({"schema": {"type": "string"}} if v3 else {"type": "string"})})
        paths[t] = {"get": {"operationId": f"get{kind}{len(paths)}", "parameters": params, "responses": {"200": ok}}}
    return paths


def openapi_v2(custom: bool = True, external: bool = True) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for g, v in group_versions(custom, external):
        paths.update(_paths(g, v, v3=False))
    return {"swagger": "2.0", "info": _INFO, "paths": paths, "definitions": _schemas()}


def openapi_v3_document(group: str, version: str) -> dict[str, Any]:
    return {"openapi": "3.0.0", "info": _INFO, "paths": _paths(group, version, v3=True),
            "components": {"schemas": _schemas()}}


def openapi_v3_index(custom: bool = True, external: bool = True) -> dict[str, Any]:
    paths = {}
    for g, v in group_versions(custom, external):
        digest = hashlib.sha512(orjson.dumps(openapi_v3_document(g, v), option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]
        paths[f"apis/{g}/{v}"] = {"serverRelativeURL": f"/openapi/v3/apis/{g}/{v}?hash={digest.upper()}"}
    return {"paths": paths}
