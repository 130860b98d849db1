"""Both programs follow the ecosystem's command-line conventions: `--version`, every flag's help
shows its default, klog-style `-v/--v N`, `--log-format text|json`, RFC 3339 timestamps."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from promscaler import logs

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "tests" / "adapter" / "rules.yaml"
PROGRAMS = {
    "adapter": ["-m", "adapter"],
    "run": ["-m", "autoscaler", "run"],
    "demo": ["-m", "autoscaler", "demo"],
    "simulate": ["-m", "autoscaler", "simulate"],
    "explain": ["-m", "autoscaler", "explain"],
    "backtest": ["-m", "autoscaler", "backtest"],
    "tune": ["-m", "autoscaler", "tune"],
}
# RFC 3339 with milliseconds and a zone (Z or +hh:mm)
RFC3339_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)$")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "250", **(env or {})})


def _options(help_text: str) -> dict[str, str]:
    """`--flag` -> its help text, from argparse's --help output (one entry per option line)."""
    out: dict[str, str] = {}
    current = None
    for line in help_text.splitlines():
        m = re.match(r"^  (-\S.*?)(?:\s{2,}(.*))?$", line)
        if m:
            names = [n.split()[0].rstrip(",") for n in m.group(1).split(", ")]
            current = next((n for n in names if n.startswith("--")), names[0])
            out[current] = (m.group(2) or "").strip()
        elif current and line.startswith(" " * 6) and line.strip():
            out[current] = f"{out[current]} {line.strip()}".strip()
        else:
            current = None
    return out


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_every_flag_has_help_showing_its_default(program):
    out = _run(*PROGRAMS[program], "--help")
    assert out.returncode == 0, out.stderr
    options = _options(out.stdout)
    assert {"--version", "--help"} <= set(options)
    if program in ("adapter", "run"):
        assert {"--v", "--log-format", "--kubeconfig"} <= set(options)
    missing = {flag: text for flag, text in options.items()
               if flag not in ("--help", "--version")
               and (not text or not re.search(r"default|required", text, re.IGNORECASE))}
    assert not missing, f"{program}: flags without help showing the default: {missing}"


def test_defaults_are_shown_as_the_user_writes_them():
    options = _options(_run(*PROGRAMS["adapter"], "--help").stdout)
    assert "(default: 1m)" in options["--metrics-relist-interval"]  # a Go duration, not 60.0
    assert "(default: false)" in options["--disable-custom-metrics"]
    assert "(default: X-Remote-User)" in options["--requestheader-username-headers"]
    options = _options(_run(*PROGRAMS["run"], "--help").stdout)
    assert "(default: 15s)" in options["--horizontal-pod-autoscaler-sync-period"]
    assert "(default: json)" in options["--log-format"]


@pytest.mark.parametrize("argv,prog", [(["-m", "adapter", "--version"], "promscaler-adapter"),
                                       (["-m", "autoscaler", "--version"], "promscaler-autoscaler"),
                                       (["-m", "autoscaler", "run", "--version"], "promscaler-autoscaler")])
def test_version(argv, prog):
    out = _run(*argv)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{prog} {metadata.version('promscaler')}"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_adapter_logs_with_rfc3339_timestamps(fmt):
    """A start-up that fails on an unreachable Prometheus: the log lines before the error."""
    out = _run("-m", "adapter", "--insecure", "--port", "1", "--prometheus-url", "http://127.0.0.1:1",
               "--config", str(RULES), "--fail-on-prometheus-unavailable", "--log-format", fmt, "--v=4",
               env={"KUBECONFIG": "", "HOME": "/nonexistent"})
    assert out.returncode == 1
    lines = [line for line in out.stderr.splitlines() if not line.startswith("promscaler-adapter:")]
    assert lines, out.stderr
    for line in lines:
        if fmt == "json":
            entry = json.loads(line)
            stamp, level = entry["ts"], entry["level"]
        else:
            stamp, level = line.split(" ")[:2]
        assert RFC3339_MS.match(stamp), line
        assert level.upper() in ("INFO", "DEBUG", "WARNING", "ERROR")
    assert "no Kubernetes configuration" in out.stderr  # the offline start says why


def test_verbosity_levels_are_klogs():
    stream = io.StringIO()
    logs.setup(2, "json", stream)
    try:
        log = logging.getLogger("test.verbosity")
        logs.vlog(log, 2, "shown at 2")
        logs.vlog(log, 4, "hidden at 2")
        log.debug("debug is V(4)")
        log.info("info is V(0)")
    finally:
        logs.setup(0, "text")
    entries = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(e["msg"], e.get("v")) for e in entries] == [("shown at 2", 2), ("info is V(0)", None)]
    assert all(RFC3339_MS.match(e["ts"]) for e in entries)


def test_repeat_limiter_logs_once_then_once_per_interval_with_a_count():
    now = [0.0]
    limiter = logs.RepeatLimiter(60.0, clock=lambda: now[0])
    assert limiter.check("a", "missing") == 0
    seen = []
    for _ in range(30):  # every 3 s for 90 s
        now[0] += 3
        seen.append(limiter.check("a", "missing"))
    logged = [(i, n) for i, n in enumerate(seen) if n is not None]
    assert logged == [(19, 19)]  # at 60 s: the 19 suppressed since
    assert limiter.check("a", "another failure") == 0  # a new message is logged at once
    limiter.clear("a")
    assert limiter.check("a", "another failure") == 0


def test_text_lines_carry_only_the_fields_the_message_does_not_say():
    stream = io.StringIO()
    logs.setup(0, "text", stream)
    try:
        logging.getLogger("test.text").info("HorizontalAutoscaler demo/web scaled Deployment demo/web 2 -> 3",
                                            extra={"autoscaler": "web", "retries": 7})
    finally:
        logs.setup(0, "text")
    (line,) = stream.getvalue().splitlines()
    stamp, level, rest = line.split(" ", 2)
    assert RFC3339_MS.match(stamp) and level == "INFO"
    assert rest == "test.text: HorizontalAutoscaler demo/web scaled Deployment demo/web 2 -> 3 retries=7"
