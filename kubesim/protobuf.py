"""Reads the Kubernetes protobuf encoding of the few core kinds clients send that way.

client-go's typed clientset (Helm's release storage among them) writes Secrets and ConfigMaps as
`application/vnd.kubernetes.protobuf`: the 4-byte magic `k8s\\0`, then a `runtime.Unknown`
(typeMeta, raw) whose `raw` is the object's own message (k8s.io/api/core/v1/generated.proto).
Only the fields those kinds carry on create and update are decoded; the sandbox answers in JSON,
which client-go accepts whatever it sent.
"""

from __future__ import annotations

import base64
from typing import Any

from promscaler.status import BadRequest

__all__ = ["MAGIC", "decode_object"]

MAGIC = b"k8s\x00"

# field number -> (JSON name, kind); kinds: str, int, bool, bytes, map (str->str), bmap (str->base64),
# strs (repeated string), or a nested field table.
_Fields = dict[int, tuple[str, Any]]
_OBJECT_META: _Fields = {
    1: ("name", "str"), 2: ("generateName", "str"), 3: ("namespace", "str"), 5: ("uid", "str"),
    6: ("resourceVersion", "str"), 7: ("generation", "int"), 11: ("labels", "map"), 12: ("annotations", "map"),
    14: ("finalizers", "strs"),
}
_KINDS: dict[str, _Fields] = {
    "Secret": {1: ("metadata", _OBJECT_META), 2: ("data", "bmap"), 3: ("type", "str"), 4: ("stringData", "map"),
               5: ("immutable", "bool")},
    "ConfigMap": {1: ("metadata", _OBJECT_META), 2: ("data", "map"), 3: ("binaryData", "bmap"),
                  4: ("immutable", "bool")},
}
_UNKNOWN: _Fields = {1: ("typeMeta", {1: ("apiVersion", "str"), 2: ("kind", "str")}), 2: ("raw", "bytes")}


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(buf):
            raise BadRequest("protobuf body truncated")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs of one message; varints as int, length-delimited as bytes."""
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(buf, i)
            out.append((num, v))
        elif wire == 2:
            n, i = _varint(buf, i)
            out.append((num, buf[i:i + n]))
            i += n
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise BadRequest(f"protobuf body: unsupported wire type {wire}")
    return out


def _map_entry(raw: bytes) -> tuple[str, bytes]:
    key, value = "", b""
    for num, v in _fields(raw):
        if num == 1 and isinstance(v, bytes):
            key = v.decode()
        elif num == 2 and isinstance(v, bytes):
            value = v
    return key, value


def _message(buf: bytes, table: _Fields) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for num, v in _fields(buf):
        if num not in table:
            continue
        name, kind = table[num]
        if isinstance(kind, dict):
            out[name] = _message(v if isinstance(v, bytes) else b"", kind)
        elif kind in ("int", "bool"):
            out[name] = bool(v) if kind == "bool" else v
        elif not isinstance(v, bytes):
            raise BadRequest(f"protobuf body: field {name} has the wrong wire type")
        elif kind == "str":
            out[name] = v.decode()
        elif kind == "bytes":
            out[name] = v
        elif kind == "strs":
            out.setdefault(name, []).append(v.decode())
        else:
            k, raw = _map_entry(v)
            out.setdefault(name, {})[k] = raw.decode() if kind == "map" else base64.b64encode(raw).decode()
    return out


def decode_object(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded Secret or ConfigMap; 415-style BadRequest otherwise."""
    if not body.startswith(MAGIC):
        raise BadRequest("protobuf body without the k8s magic prefix")
    unknown = _message(body[len(MAGIC):], _UNKNOWN)
    meta = unknown.get("typeMeta") or {}
    kind, api_version = meta.get("kind", ""), meta.get("apiVersion", "")
    if kind not in _KINDS or api_version != "v1":
        raise BadRequest(f"protobuf bodies are read for v1 Secret and ConfigMap only, not {api_version} {kind}")
    return {"apiVersion": api_version, "kind": kind, **_message(unknown.get("raw", b""), _KINDS[kind])}
