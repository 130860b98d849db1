"""Shared core of promscaler: what the adapter, the autoscaler and the sandbox all speak.

Kubernetes quantities, label selectors, durations and times, `metav1.Status` errors and the
wire shapes of the three metrics APIs live here, once.
"""
