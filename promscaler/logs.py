"""One logging set-up for both programs, with Kubernetes' command-line conventions.

klog-style verbosity (`-v/--v N`: 0 is the default, 4 debug, 6 every Prometheus query and API
request), `--log-format text|json`, RFC 3339 timestamps with milliseconds and zone in both
formats, `--version`, and a help formatter that shows every flag's default. `RepeatLimiter`
keeps a failure that recurs every sync from flooding the log.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Hashable
from datetime import datetime
from typing import IO, Any

from promscaler import __version__, flags
from promscaler.times import format_duration

__all__ = ["HelpFormatter", "RepeatLimiter", "add_logging_flags", "add_version_flag", "level", "setup", "version",
           "vlog"]

# klog V(n) -> Python level: V(0) is INFO, V(4) is DEBUG, higher numbers are ever more detailed.
_LEVELS = {0: logging.INFO, 1: 18, 2: 16, 3: 14, 4: logging.DEBUG, 5: 9, 6: 8, 7: 7, 8: 6, 9: 5, 10: 4}
_VERBOSITY_OF = {lvl: v for v, lvl in _LEVELS.items()}
# Libraries whose own INFO/DEBUG lines are noise at ordinary verbosities.
_NOISY = ("httpx", "httpcore", "aiohttp", "kubernetes", "urllib3", "uvicorn", "uvicorn.error", "asyncio",
          "multipart")


def level(verbosity: int) -> int:
    """The Python logging level of klog's V(verbosity)."""
    return _LEVELS[max(0, min(verbosity, max(_LEVELS)))]


def vlog(logger: logging.Logger, verbosity: int, msg: str, *args: Any, **kwargs: Any) -> None:
    """`klog.V(verbosity).Infof(...)`."""
    lvl = level(verbosity)
    if logger.isEnabledFor(lvl):
        logger.log(lvl, msg, *args, **kwargs)


def version() -> str:
    """The running build's version, from the code itself: an installed distribution's metadata
    lookup (importlib.metadata) cost every start ~10 ms."""
    return __version__


def _timestamp(record: logging.LogRecord) -> str:
    """RFC 3339 with milliseconds and the zone offset: 2026-11-24T04:23:19.123+00:00."""
    return datetime.fromtimestamp(record.created).astimezone().isoformat(timespec="milliseconds")


def _level_name(record: logging.LogRecord) -> str:
    return "DEBUG" if record.levelno < logging.INFO else record.levelname


_STD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STD}


class TextFormatter(logging.Formatter):
    """`TIME LEVEL logger: message key=value ...` on one line; a field the message already says
    (the autoscaler's name, the reason) is left out, JSON keeps them all."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        line = f"{_timestamp(record)} {_level_name(record)} {record.name}: {message}"
        extras = {k: v for k, v in _extras(record).items() if str(v) not in message}
        if extras:
            line += " " + " ".join(f"{k}={json.dumps(v, default=str)}" for k, v in extras.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, v (below INFO), logger, msg, and any `extra=` fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"ts": _timestamp(record), "level": _level_name(record).lower()}
        if record.levelno < logging.INFO:
            out["v"] = _VERBOSITY_OF.get(record.levelno, 4)
        out.update({"logger": record.name, "msg": record.getMessage()})
        out.update(_extras(record))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup(verbosity: int = 0, fmt: str = "text", stream: IO[str] | None = None) -> None:
    """Route every logger to one stderr handler at klog verbosity `verbosity`."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level(verbosity))
    for name in _NOISY:  # their chatter only at the highest verbosities
        logging.getLogger(name).setLevel(logging.NOTSET if verbosity >= 9 else logging.WARNING)


def add_logging_flags(parser: argparse.ArgumentParser | Any, default_format: str = "text") -> None:
    """`-v/--v N` and `--log-format`, as kube-controller-manager and prometheus-adapter spell them."""
    parser.add_argument("-v", "--v", dest="v", type=flags.non_negative_int, default=0, metavar="N",
                        help="log verbosity: 0 start-up, changes and warnings; 2 more detail; 4 debug; "
                             "6 every Prometheus query and failed request")
    parser.add_argument("--log-format", choices=("text", "json"), default=default_format,
                        help="text: one human-readable line per entry; json: one JSON object per line")


def add_version_flag(parser: argparse.ArgumentParser, prog: str) -> None:
    parser.add_argument("--version", action="version", version=f"{prog} {version()}",
                        help="print the version and exit")


def _show_default(action: argparse.Action) -> str:
    value = action.default
    if isinstance(value, bool):
        return str(value).lower()
    if action.type is flags.duration and isinstance(value, int | float):
        return format_duration(value)
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "none"
    if value is None:
        return "none"
    return str(value)


class HelpFormatter(argparse.HelpFormatter):
    """Appends `(default: X)` to every flag's help unless the help already says it."""

    def __init__(self, prog: str, **kwargs: Any) -> None:
        super().__init__(prog, max_help_position=40, **kwargs)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (action.option_strings and action.default is not argparse.SUPPRESS
                and "default" not in text.lower() and "required" not in text.lower()):
            text = f"{text} (default: {_show_default(action).replace('%', '%%')})".lstrip()
        return text


class RepeatLimiter:
    """Decides whether a failure that repeats (every sync, say) is logged now: the first time,
    then at most once per `interval`, with how often it occurred since. A different message for
    the same key, or `clear` after a success, logs the next occurrence at once."""

    def __init__(self, interval: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self._state: dict[Hashable, tuple[str, float, int]] = {}  # key -> (message, last logged, suppressed)

    def check(self, key: Hashable, message: str) -> int | None:
        """None: do not log; else the number of occurrences suppressed since the last time it was logged."""
        now = self.clock()
        last = self._state.get(key)
        if last is None or last[0] != message or now - last[1] >= self.interval:
            self._state[key] = (message, now, 0)
            return 0 if last is None or last[0] != message else last[2]
        self._state[key] = (last[0], last[1], last[2] + 1)
        return None

    def clear(self, key: Hashable) -> None:
        self._state.pop(key, None)
