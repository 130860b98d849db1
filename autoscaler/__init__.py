"""promscaler's autoscaler: the Kubernetes HPA algorithm, live (`run`) and offline (`simulate`)."""
