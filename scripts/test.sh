#!/usr/bin/env bash
# Set up if needed, then run the whole test suite. Extra arguments go to pytest.
# Test files run in parallel (pytest-xdist, one file per worker at a time): each worker starts its
# own Prometheus and servers on free loopback ports. PYTEST_WORKERS=0 runs everything in this process.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec .venv/bin/python -m pytest -n "${PYTEST_WORKERS:-4}" --dist loadfile "$@"
