"""The reference secrets service ("dev server") that tests, benchmarks and the demo run against.

It follows ``docs/service-api.md`` and, where that is silent, ``docs/service-contract.md``, so that the
operator can be exercised end to end without the real service. Layout (one responsibility each):

- ``config``: settings of one server instance; ``cli``: argument parsing and uvicorn start.
- ``db`` / ``store`` / ``identity_store``: SQLite schema and data access.
- ``listing``: list-secrets semantics (recursion, imports, overrides, filters, expansion, ETag).
- ``tokens`` / ``auth`` / ``tokenreview``: access tokens, logins, the Kubernetes TokenReview.
- ``admin_token``: the token that locks ``/_admin`` (given, or generated into a 0600 file).
- ``permissions`` / ``globs``: roles, additional privileges and their path/environment conditions.
- ``events``: per-subscriber queues and the two message shapes.
- ``faults`` / ``stats``: ASGI middleware for fault injection and request counters.
- ``routes_*``: thin HTTP handlers; ``app``: wiring; ``seed``: the seed YAML; ``testing``: helper
  that runs the server as a subprocess for other packages' tests.

The operator never imports this package (import-linter enforces it).
"""
