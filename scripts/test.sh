#!/usr/bin/env bash
# Set up if needed, then run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec .venv/bin/python -m pytest "$@"
