"""Serving security for the adapter, as the Kubernetes apiserver libraries do it.

`tls` builds and reloads the serving TLS context, `peer` carries the verified client certificate
into the ASGI scope, `authn` authenticates (front-proxy headers, x509, TokenReview, anonymous),
`authz` authorizes (always-allow paths, SubjectAccessReview), `middleware` runs both per request
and `serve` wires them into uvicorn for `--secure-port`.
"""
