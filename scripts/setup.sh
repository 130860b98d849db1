#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: Debian's Prometheus, VictoriaMetrics, Chromium and npm (only
# when missing), the reports' charting library (npm ci), a virtual environment, and the project
# installed into it with its test, demo and bench extras and Helm's
# engine, at the versions constraints.txt pins. Sourced by demo.sh and test.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# Debian packages, each only when its binary is missing: Prometheus (prometheus, promtool) and
# VictoriaMetrics (victoria-metrics), the backends the tests start on loopback; Chromium, the browser
# the report tests drive headless (Playwright, pointed at it); npm, which installs the charting library
# the HTML reports inline (below).
missing=()
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || missing+=(prometheus)
command -v victoria-metrics >/dev/null 2>&1 || missing+=(victoria-metrics)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing Debian packages ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  # The packages may start system-wide services (:9090, :8428); the project never uses them.
fi

# uPlot, the charting library `backtest`/`tune` inline into report.html: from npm at the version and
# integrity autoscaler/backtest/web/package-lock.json pins, into its git-ignored node_modules/.
web=autoscaler/backtest/web
if ! cmp -s "$web/package-lock.json" "$web/node_modules/.lock-installed"; then
  echo "setup: npm ci ($web)" >&2
  npm ci --prefix "$web" --no-audit --no-fund --loglevel=error >/dev/null
  cp "$web/package-lock.json" "$web/node_modules/.lock-installed"
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  "$PY" -m venv .venv
fi
# Exact versions from constraints.txt (scripts/lock.sh writes it): a release published tomorrow
# changes nothing here until the lock is regenerated. Re-installed when pyproject.toml or the lock changes.
stamp=".venv/.installed-$(cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "setup: pip install -c constraints.txt -e '.[test,demo,bench]' helm-sdkpy" >&2
  .venv/bin/pip install -q --disable-pip-version-check -c constraints.txt --upgrade pip >/dev/null
  .venv/bin/pip install -q --disable-pip-version-check -c constraints.txt -e '.[test,demo,bench]'
  # Helm's own engine for the chart tests: helm-sdkpy wraps Helm v4 as a shared library. Its metadata
  # asks for Python >= 3.12 but it runs on 3.11 (cffi only), hence --ignore-requires-python.
  .venv/bin/pip install -q --disable-pip-version-check --ignore-requires-python -c constraints.txt helm-sdkpy
  rm -f .venv/.installed-*
  touch "$stamp"
fi
export PATH="$ROOT/.venv/bin:$PATH"
