"""What the apiextensions server does to a custom resource before storing it: structural-schema
defaulting, then validation against the schema's bounds and its CEL rules
(`x-kubernetes-validations`), refusing with 422 Invalid and a field path per failure.

The schema keywords read are those CRDs use for bounds (type, enum, required, minimum, maximum,
minItems, maxItems, pattern, anyOf for int-or-string); CEL runs on the `common-expression-language`
package, imported when a CRD carries rules, with what Kubernetes' CEL adds that a CRD here uses:
the timestamp accessors with a time zone (`getHours('Europe/Berlin')`, cel-go's `timeZone`: an
IANA name, or a `+05:00` offset; an unknown name is a runtime error). As in apiextensions'
cel/validation.go, a rule that is false is reported at its `fieldPath` with its message, a rule
that fails to evaluate at the node's own path as `<error> evaluating rule: <message>`; either way
the value shown is the node's type (`Invalid value: "string"`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from promscaler.status import InternalError, Invalid

__all__ = ["admit", "apply_defaults", "validate"]

Schema = Mapping[str, Any]
_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
                                       "integer": (int,), "number": (int, float)}
_programs: dict[str, Any] = {}


def apply_defaults(schema: Schema, value: Any) -> Any:
    """Fill absent properties that have a `default`, top-down (a default is defaulted in turn)."""
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                apply_defaults(sub, value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            apply_defaults(schema["items"], item)
    return value


def _type_ok(types: str, value: Any) -> bool:
    if isinstance(value, bool) and types in ("integer", "number"):
        return False
    return isinstance(value, _TYPES.get(types, (object,)))


def _shown(value: Any) -> str:
    return '"object"' if isinstance(value, dict) else ('"array"' if isinstance(value, list) else repr(value))


class _EvalError(ValueError):
    """A runtime error of a function kubesim adds, worded as cel-go words it."""


def _zone(name: str) -> tzinfo:
    """cel-go's timeZone(): a name with a colon is a UTC offset (`+05:00`), else time.LoadLocation's
    IANA name ("" and "UTC" are UTC)."""
    if ":" in name:
        sign = -1 if name.startswith("-") else 1
        hours, _, minutes = name.lstrip("+-").partition(":")
        try:
            return timezone(sign * timedelta(hours=int(hours), minutes=int(minutes)))
        except ValueError:
            raise _EvalError(f"unknown time zone {name}") from None
    if name in ("", "UTC"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise _EvalError(f"unknown time zone {name}") from None


def _accessor(part: Any) -> Any:
    def get(t: datetime, zone: str | None = None) -> int:
        return int(part(t.astimezone(UTC if zone is None else _zone(zone))))
    return get


# Kubernetes' timestamp accessors (cel-spec), each with its optional time zone argument.
_TIMESTAMP_ACCESSORS = {
    "getFullYear": lambda t: t.year, "getMonth": lambda t: t.month - 1, "getDate": lambda t: t.day,
    "getDayOfMonth": lambda t: t.day - 1, "getDayOfWeek": lambda t: t.isoweekday() % 7,
    "getDayOfYear": lambda t: t.timetuple().tm_yday - 1, "getHours": lambda t: t.hour,
    "getMinutes": lambda t: t.minute, "getSeconds": lambda t: t.second,
    "getMilliseconds": lambda t: t.microsecond // 1000,
}
_GO_ERROR = re.compile(r"_EvalError: (.*?)\. Check function")


_FUNCTIONS = {name: _accessor(part) for name, part in _TIMESTAMP_ACCESSORS.items()}


def _context(value: Any) -> Any:
    """The evaluation context of a node's rules: `self` and the accessors (made once, above)."""
    import cel

    return cel.Context(variables={"self": value}, functions=_FUNCTIONS)


def _cel(rule: str) -> Any:
    program = _programs.get(rule)
    if program is None:
        try:
            import cel
        except ImportError:  # pragma: no cover - the test extra installs it
            raise InternalError("kubesim: CRD validation rules need the common-expression-language package") from None
        program = _programs[rule] = cel.compile(rule)
    return program


def _rule_errors(schema: Schema, value: Any, path: str) -> list[str]:
    """The node's `x-kubernetes-validations`, as apiextensions' validateExpressions reports them."""
    errors: list[str] = []
    shown = f'"{schema.get("type", "")}"'
    context = None  # one for all the node's rules, made after the first compiles (_cel says if cel is missing)
    for rule in schema.get("x-kubernetes-validations") or ():
        message = (rule.get("message") or "").strip()
        try:
            program = _cel(rule["rule"])
            if context is None:
                context = _context(value)
            ok = program.execute(context)
        except (KeyError, ValueError, TypeError, RuntimeError) as exc:
            go = _GO_ERROR.search(str(exc))
            errors.append(f"{path}: Invalid value: {shown}: {go.group(1) if go else exc} evaluating rule: "
                          f"{message or rule['rule'].strip()}")
            continue
        if ok is not True:
            errors.append(f"{path}{rule.get('fieldPath', '')}: Invalid value: {shown}: "
                          f"{message or 'failed rule: ' + rule['rule'].strip()}")
    return errors


def validate(schema: Schema, value: Any, path: str) -> list[str]:
    """Field errors as kube-apiserver words them: `path: Invalid value: ...: why`."""
    errors: list[str] = []
    if "anyOf" in schema and not any(not validate(alt, value, path) for alt in schema["anyOf"]):
        errors.append(f"{path}: Invalid value: {_shown(value)}: must match one of the allowed types")
        return errors
    types = schema.get("type")
    if types and not _type_ok(types, value):
        return [f"{path}: Invalid value: {_shown(value)}: {path} in body must be of type {types}"]
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(f'"{v}"' for v in schema["enum"])
        errors.append(f"{path}: Unsupported value: {_shown(value)}: supported values: {allowed}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: Invalid value: {value}: {path} in body should be greater than or equal to "
                          f"{schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: Invalid value: {value}: {path} in body should be less than or equal to "
                          f"{schema['maximum']}")
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{path}: Invalid value: {value!r}: {path} in body should match '{schema['pattern']}'")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{path}: Invalid value: {len(value)}: {path} in body should have at least "
                          f"{schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: Too many: {len(value)}: must have at most {schema['maxItems']} items")
        if isinstance(schema.get("items"), Mapping):
            for i, item in enumerate(value):
                errors += validate(schema["items"], item, f"{path}[{i}]")
    if isinstance(value, dict):
        for key in schema.get("required") or ():
            if key not in value:
                errors.append(f"{path}.{key}: Required value")
        for key, sub in (schema.get("properties") or {}).items():
            if key in value:
                errors += validate(sub, value[key], f"{path}.{key}")
    if errors:
        return errors  # rules assume a value that passed its schema
    return _rule_errors(schema, value, path)


def admit(crd: Mapping[str, Any], version: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Default and validate a custom resource of `crd` served at `version`; Invalid on failure."""
    spec = crd.get("spec") or {}
    schema = next((((v.get("schema") or {}).get("openAPIV3Schema") or {}) for v in spec.get("versions") or ()
                   if v.get("name") == version), {})
    if not schema:
        return obj
    kept: dict[str, Any] = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
    apply_defaults(schema, obj)
    obj.update(kept)
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    errors: list[str] = []
    props = schema.get("properties") or {}
    for key, value in body.items():
        if key in props:
            errors += validate(props[key], value, key)
    for key in schema.get("required") or ():
        if key not in obj:
            errors.append(f"{key}: Required value")
    if not errors:
        top = {k: v for k, v in schema.items() if k not in ("properties", "required")}
        errors += validate(top, obj, "<root>") if top.get("x-kubernetes-validations") else []
    if errors:
        kind = (spec.get("names") or {}).get("kind", "Object")
        name = (obj.get("metadata") or {}).get("name", "")
        raise Invalid(f'{kind}.{spec.get("group", "")} "{name}" is invalid: ' + ", ".join(errors),
                      {"name": name, "group": spec.get("group", ""), "kind": kind,
                       "causes": [{"reason": "FieldValueInvalid", "message": e, "field": e.split(":", 1)[0]}
                                  for e in errors]})
    return obj
