"""Helpers shared by the benchmarks in ``bench/``.

Nothing here imports Ray, Redis or the Strata server packages: a benchmark that talks to
Strata over HTTP can run from a separate interpreter (``.venv-bench``, set up as the
docstring of ``bench/recall_latency.py`` says).

``stats``: latency series and percentiles; ``http_load``: requests at a fixed number in
flight; ``server``: a ``strata serve`` subprocess; ``topics``: the synthetic users' world;
``workload``: LoCoMo and synthetic turns and questions; ``strata_http``: ingestion and
admin calls over HTTP; ``mem0_peer``: the mem0 baseline.
"""
