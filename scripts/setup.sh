#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: Debian's Prometheus and VictoriaMetrics (only when missing), a virtual
# environment, and the project installed into it with its test and demo extras. Sourced by demo.sh and test.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing Debian package prometheus" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq prometheus >/dev/null
  # The package may start a system-wide Prometheus on :9090; the project never uses it.
fi
# VictoriaMetrics answers the forecast PromQL in the tests (tests/adapter/test_forecast_victoriametrics.py).
if ! command -v victoria-metrics >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing Debian package victoria-metrics" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq victoria-metrics >/dev/null
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  "$PY" -m venv .venv
fi
stamp=".venv/.installed-$(cat pyproject.toml | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "setup: pip install -e '.[test,demo]'" >&2
  .venv/bin/pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  .venv/bin/pip install -q --disable-pip-version-check -e '.[test,demo]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi
# Helm's own engine for the chart tests: helm-sdkpy wraps Helm v4 as a shared library. Its metadata
# asks for Python >= 3.12 but it runs on 3.11 (cffi only), hence --ignore-requires-python.
if ! .venv/bin/python -c 'import helm_sdkpy' >/dev/null 2>&1; then
  echo "setup: pip install helm-sdkpy (Helm v4 engine)" >&2
  .venv/bin/pip install -q --disable-pip-version-check --ignore-requires-python 'helm-sdkpy>=0.1.32,<0.2'
fi
export PATH="$ROOT/.venv/bin:$PATH"
