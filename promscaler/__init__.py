"""Shared core of promscaler: what the adapter, the autoscaler and the sandbox all speak.

Kubernetes quantities, label selectors, durations and times, `metav1.Status` errors and the
wire shapes of the three metrics APIs live here, once.
"""

__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it; the chart's appVersion matches)
