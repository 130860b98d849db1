"""Plain manifests for `kubectl apply -f apiservice/`, and `python -m apiservice.certs`, which makes
the adapter's serving certificate and writes its CA into the APIService objects."""
