"""Helpers shared by the benchmarks in ``bench/``.

Nothing here but ``local_app`` imports Ray, Redis or the Strata server packages: a
benchmark that talks to Strata over HTTP can run from a separate interpreter
(``.venv-bench``, set up as the docstring of ``bench/recall_latency.py`` says).

``stats``: latency series and percentiles; ``http_load``: requests at a fixed number in
flight; ``server``: a ``strata serve`` subprocess; ``topics``: the synthetic users' world;
``workload``: LoCoMo and synthetic turns and questions; ``strata_http``: ingestion and
admin calls over HTTP; ``mem0_peer``: the mem0 baseline; ``process_cpu``: CPU seconds of a
process tree, per role; ``process_rss``: its resident memory; ``milvus_lite_engine``:
milvus-lite's background work and segments (its internals: it has no public API for them);
``local_app``: the whole app in this process's own Ray, for benchmarks that call its actors.
"""
