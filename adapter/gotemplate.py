"""The subset of Go's text/template that prometheus-adapter rules use, with `<<` `>>` delimiters.

Supported actions: `<<.Field>>` and `<<.Map.key>>`, `<<.>>` / `<<$v>>` inside range,
`<<if PIPE>>...<<else>>...<<end>>`, `<<range .Slice>>` and `<<range $i, $v := .Slice>>`,
and the `<<-` / `->>` whitespace trimming markers. Anything else is a parse error at load
time, so a rule never fails at query time for its template.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Template", "TemplateError"]


class TemplateError(ValueError):
    """A template outside the supported subset, or one that references an unknown field."""


_ACTION = re.compile(r"<<(-\s)?(.*?)(\s-)?>>", re.S)
_PATH = re.compile(r"^(\.|\.[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*|\$[A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*)$")
_RANGE_VARS = re.compile(r"^(?:(\$[A-Za-z0-9_]*)\s*(?:,\s*(\$[A-Za-z0-9_]*))?\s*:=\s*)?(\S+)$")


@dataclass
class _Node:
    kind: str  # text | value | if | range
    text: str = ""
    body: list[_Node] = field(default_factory=list)
    orelse: list[_Node] = field(default_factory=list)
    vars: tuple[str | None, str | None] = (None, None)


class Template:
    """Parse once, `render(args)` many times. `fields` limits which top-level fields exist."""

    def __init__(self, source: str, fields: Sequence[str]) -> None:
        self.source = source
        self.fields = frozenset(fields)
        self.nodes = self._parse(source)

    # -- parsing ------------------------------------------------------------------------------
    def _check_path(self, path: str) -> str:
        if not _PATH.match(path):
            raise TemplateError(f"unsupported template action {path!r}")
        if path.startswith(".") and path != ".":
            top = path[1:].split(".")[0]
            if top not in self.fields:
                raise TemplateError(f"unknown field {path!r} (known: {', '.join(sorted(self.fields))})")
        return path

    def _parse(self, source: str) -> list[_Node]:
        root: list[_Node] = []
        stack: list[tuple[_Node | None, list[_Node]]] = [(None, root)]
        pos = 0
        for m in _ACTION.finditer(source):
            text = source[pos:m.start()]
            if m.group(1):
                text = text.rstrip()
            pos = m.end()
            if m.group(3):
                rest = source[pos:]
                pos += len(rest) - len(rest.lstrip())
            if text:
                stack[-1][1].append(_Node("text", text))
            action = m.group(2).strip()
            if action.startswith("/*"):
                continue
            word, _, arg = action.partition(" ")
            arg = arg.strip()
            if word == "if":
                node = _Node("if", self._check_path(arg))
                stack[-1][1].append(node)
                stack.append((node, node.body))
            elif word == "range":
                vm = _RANGE_VARS.match(arg)
                if not vm:
                    raise TemplateError(f"unsupported range {action!r}")
                a, b, path = vm.groups()
                node = _Node("range", self._check_path(path), vars=((a, b) if b else (None, a)))
                stack[-1][1].append(node)
                stack.append((node, node.body))
            elif word == "else":
                if len(stack) == 1 or arg:
                    raise TemplateError(f"unexpected <<{action}>>")
                opened = stack.pop()[0]
                assert opened is not None  # len(stack) > 1: not the root
                stack.append((opened, opened.orelse))
            elif word == "end":
                if len(stack) == 1:
                    raise TemplateError("unexpected <<end>>")
                stack.pop()
            else:
                stack[-1][1].append(_Node("value", self._check_path(action)))
        if len(stack) != 1:
            raise TemplateError("unclosed <<if>> or <<range>> (missing <<end>>)")
        if source[pos:]:
            root_tail = source[pos:]
            if "<<" in root_tail:
                raise TemplateError("unterminated action (missing '>>')")
            stack[-1][1].append(_Node("text", root_tail))
        return root

    # -- rendering ----------------------------------------------------------------------------
    @staticmethod
    def _lookup(path: str, dot: Any, args: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
        if path == ".":
            return dot
        if path.startswith("$"):
            name, *rest = path.split(".")
            value = scope.get(name, args if name == "$" else None)
        else:
            rest = path[1:].split(".")
            value = dot
        for part in rest:
            value = value.get(part, "") if isinstance(value, Mapping) else ""
        return value

    @staticmethod
    def _str(value: Any) -> str:
        if isinstance(value, (list, tuple)):
            return "[" + " ".join(str(v) for v in value) + "]"
        return "" if value is None else str(value)

    def _render(self, nodes: list[_Node], dot: Any, args: Mapping[str, Any], scope: dict[str, Any],
                out: list[str]) -> None:
        for n in nodes:
            if n.kind == "text":
                out.append(n.text)
            elif n.kind == "value":
                out.append(self._str(self._lookup(n.text, dot, args, scope)))
            elif n.kind == "if":
                self._render(n.body if self._lookup(n.text, dot, args, scope) else n.orelse, dot, args, scope, out)
            else:
                seq = self._lookup(n.text, dot, args, scope) or ()
                items = list(seq.items()) if isinstance(seq, Mapping) else list(enumerate(seq))
                if not items:
                    self._render(n.orelse, dot, args, scope, out)
                for key, value in items:
                    inner = dict(scope)
                    if n.vars[0]:
                        inner[n.vars[0]] = key
                    if n.vars[1]:
                        inner[n.vars[1]] = value
                    self._render(n.body, value, args, inner, out)

    def render(self, args: Mapping[str, Any]) -> str:
        out: list[str] = []
        self._render(self.nodes, args, args, {"$": args}, out)
        return "".join(out)
