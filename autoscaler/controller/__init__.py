"""The live controller: informers -> work queue -> reconcile (decide, /scale, status, events),
behind leader election. Entry point: `python -m autoscaler run` (cli.main)."""
