"""`autoscaler explain`: why a live autoscaler decides what it decides, right now.

`gather` reads the cluster through the controller's own clients (`controller.scale`,
`controller.metrics`, `objects`), `compare` sets the recomputed decision beside the object's
status, `capture` writes the moment as a `simulate` scenario, `cli` is the command.
"""
