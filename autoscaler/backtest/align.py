"""A replay's queries on the history's own grid: the same history gives the same answer wherever
it lies in time (issue 35).

Prometheus (and VictoriaMetrics) evaluate a subquery `e[r:s]` at the absolute multiples of `s`,
VictoriaMetrics aligns a long range query's start to its step, and prometheus-api-client sends
whole seconds: where a history falls against those grids would change which samples a forecast
reads. So each range query is evaluated in a frame that starts `delta` earlier, on a whole
multiple of every period the backend aligns to (1 s, the step, each subquery's step), and every
selector reads `delta` later (`offset -delta`, added to its own): each reads the history at
exactly the instants it would have without the frame, and each subquery's points fall at whole
multiples of its step from the replay's first step, wherever that is. `time()` is moved back by
`delta` too. Selectors pinned with `@` are left as they are. With `delta` zero (a `--from` on
such a multiple) the query is unchanged.

The adapter's live queries are never rewritten: this is the backtest's read only.
"""

from __future__ import annotations

import math
import re
from datetime import datetime

from adapter.forecast import promql_duration
from promscaler.times import PROMQL_DURATION, parse_duration

__all__ = ["DEFAULT_SUBQUERY_STEP", "frame", "shift"]

DEFAULT_SUBQUERY_STEP = 60.0  # `e[r:]`: Prometheus' default evaluation interval

_TOKEN = re.compile(r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<comment>\#[^\n]*)
  | (?P<space>\s+)
  | (?P<matchers>\{(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`|[^}"'`])*\})
  | (?P<bracket>\[[^\]]*\])
  | (?P<offset>\boffset\s+(?P<sign>-?)\s*(?P<duration>""" + PROMQL_DURATION + r"""))
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:ms|[smhdwy])*)
  | (?P<name>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)
_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
             "offset", "inf", "nan", "start", "end"}
_LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
                 "quantile", "limitk", "limit_ratio"}
_SUBQUERY_STEP = re.compile(rf"\[\s*(?:{PROMQL_DURATION})\s*:\s*({PROMQL_DURATION})?\s*\]")


def frame(promql: str, start: datetime, step: float) -> tuple[str, float]:
    """`promql` for a range query from `start` every `step` seconds, as sent from `start - delta`
    instead, and `delta` (seconds, whole milliseconds): it reads the history as the original
    does, with every subquery's points at whole multiples of its step from `start`."""
    periods = [1000, round(step * 1000)]
    periods += [round((parse_duration(s) if s else DEFAULT_SUBQUERY_STEP) * 1000)
                for s in _SUBQUERY_STEP.findall(_strip_strings(promql))]
    delta = round(start.timestamp() * 1000) % math.lcm(*(p for p in periods if p > 0))
    return (shift(promql, delta / 1000), delta / 1000) if delta else (promql, 0.0)


def _strip_strings(promql: str) -> str:
    return "".join("\"\"" if m.lastgroup == "string" else m.group() for m in _TOKEN.finditer(promql))


def shift(promql: str, seconds: float) -> str:
    """`promql` with every selector reading `seconds` later (`offset -seconds` added to its own) and
    `time()` `seconds` later: its value at t - seconds is the original's at t."""
    tokens = [(m.lastgroup or "other", m.group(), m) for m in _TOKEN.finditer(promql)]
    out: list[str] = []
    i = 0

    def next_index(j: int) -> int:
        while j < len(tokens) and tokens[j][0] in ("space", "comment"):
            j += 1
        return j

    def kind(j: int) -> str:
        return tokens[j][0] if j < len(tokens) else ""

    def text(j: int) -> str:
        return tokens[j][1] if j < len(tokens) else ""

    previous = ""  # the last significant token's text
    while i < len(tokens):
        k, t, _ = tokens[i]
        if k == "name" and t.lower() in _LABEL_LISTS:  # a label list: names, not selectors
            j = next_index(i + 1)
            if text(j) == "(":
                close = next(c for c in range(j, len(tokens)) if tokens[c][1] == ")")
                out.append("".join(tok for _, tok, _ in tokens[i:close + 1]))
                previous, i = ")", close + 1
                continue
        if k == "name" and t == "time" and text(next_index(i + 1)) == "(":
            close = next_index(next_index(i + 1) + 1)
            if text(close) == ")":
                out.append(f"(time() + {_seconds(seconds)})")
                previous, i = ")", close + 1
                continue
        is_selector_name = (k == "name" and t.lower() not in _KEYWORDS and previous != "@"
                            and text(next_index(i + 1)) != "("
                            and not (t in _AGGREGATIONS and text(next_index(i + 1)).lower() in ("by", "without")))
        if is_selector_name or k == "matchers":
            end = i + 1
            j = next_index(end)
            if k == "name" and kind(j) == "matchers":
                end = j + 1
            selector = "".join(tok for _, tok, _ in tokens[i:end])
            j = next_index(end)
            range_ = ""
            if kind(j) == "bracket" and ":" not in text(j):
                range_, end = text(j), j + 1
            j = next_index(end)
            own = 0.0
            if kind(j) == "offset":
                m = tokens[j][2]
                own = (-1 if m.group("sign") else 1) * parse_duration(m.group("duration"))
                end = j + 1
            if text(next_index(end)) == "@":  # pinned in time: the frame does not move it
                out.append("".join(tok for _, tok, _ in tokens[i:end]))
            else:
                subquery = kind(next_index(end)) == "bracket"  # `x[5m:1m]`: the offset inside the subquery
                moved = f"{selector}{range_} offset {_signed(own - seconds)}"
                out.append(f"({moved})" if subquery else moved)
            previous, i = "selector", end
            continue
        out.append(t)
        if k not in ("space", "comment"):
            previous = t
        i += 1
    return "".join(out)


def _signed(seconds: float) -> str:
    """A PromQL offset duration, negative when reading ahead."""
    return ("-" if seconds < 0 else "") + promql_duration(abs(seconds))


def _seconds(seconds: float) -> str:
    return f"{seconds:.3f}".rstrip("0").rstrip(".")
