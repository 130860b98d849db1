"""The sandbox: real processes and an in-process Kubernetes API server standing in for a
cluster, for the tests, the demo and the benchmarks. Never imported by the adapter or the
autoscaler themselves."""
