#!/usr/bin/env bash
# Set up if needed (plus Debian's wrk, the load generator), then run every benchmark.
# Results: bench/results/*.json and bench/results/adapter.md. Each prints its figures next to its goals.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
if ! command -v wrk >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq wrk >/dev/null
fi
status=0
for b in decision_bench keda_bench controller_bench release_bench adapter_bench resource_bench backtest_bench report_bench tune_bench real_traces_bench; do
  echo "== bench/$b.py"
  .venv/bin/python "bench/$b.py" || status=1
done
exit $status
