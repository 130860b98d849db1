#!/usr/bin/env bash
# Set up if needed, then run the live demo: Prometheus, the adapter, the autoscaler and an
# in-process Kubernetes API server, all on loopback. Extra arguments go to the demo.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec .venv/bin/python -m autoscaler demo "$@"
