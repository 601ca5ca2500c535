"""Strata's configuration: one ``Settings`` object, read once at an entry point.

Every field maps to an environment variable with the ``STRATA_`` prefix
(``data_dir`` ↔ ``STRATA_DATA_DIR``). Library code receives a ``Settings`` (or the
values it needs) as an argument and never reads the environment itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from strata.models import check_agent
from strata.recall.recipes import RECIPES

__all__ = ["ApiKey", "Settings"]


class ApiKey(BaseSettings):
    """One API key: which tenant it speaks for and what it may do."""

    model_config = SettingsConfigDict(extra="forbid")

    tenant: str
    role: Literal["admin", "agent"] = "agent"
    recipe: str | None = Field(default=None, description=(
        "the recall recipe (scenario profile) of this key's recalls when a request names "
        "none, e.g. qa, advisor, support"))
    agent: str | None = Field(default=None, description=(
        "the agent this key speaks for: its turns and memories are that agent's, and it sees "
        "only what that agent may see (shared memories, its own, those shared with it)"))
    rate_per_s: float | None = Field(default=None, ge=0, description=(
        "this key's own request rate limit (requests a second; 0: none), in place of "
        "rate_limit_key_per_s"))
    burst: int | None = Field(default=None, ge=0, description=(
        "this key's own burst, in place of rate_limit_key_burst"))

    @field_validator("agent")
    @classmethod
    def _agent(cls, value: str | None) -> str | None:
        return check_agent(value)


class Settings(BaseSettings):
    """All of Strata's settings and their defaults, each read from ``STRATA_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="STRATA_", extra="ignore")

    data_dir: Path = Field(default=Path("./data"), description="Where local state lives.")
    milvus_uri: str = Field(
        default="",
        description="A file path selects milvus-lite; http(s)://… selects a Milvus server. "
        "Empty means <data_dir>/milvus.db.",
    )
    milvus_token: str = ""
    redis_url: str = Field(
        default="",
        description="redis://… of a Redis server. Empty starts an embedded redis-server "
        "with AOF under <data_dir>/redis.",
    )
    redis_prefix: str = "strata:"
    redis_appendfsync: Literal["always", "everysec"] = Field(default="always", description=(
        "when the embedded redis-server fsyncs its AOF: 'always' before it replies, so an "
        "acknowledged turn survives a kill -9 of Redis or of the machine; 'everysec' once a "
        "second, cheaper, and a killed Redis can lose up to ~2 s of acknowledged writes. "
        "Not applied to a Redis server of your own (STRATA_REDIS_URL): configure it there "
        "(docs/deploy.md)"))
    redis_wait_replicas: int = Field(default=0, ge=0, le=16, description=(
        "> 0: each WAL append (a turn, a task-state patch, a close) is followed by Redis's "
        "WAIT for this many replicas, and acknowledged only once they have it; fewer within "
        "redis_wait_timeout_ms is a 503 (the client retries with its turn_id). 0: no WAIT"))
    redis_wait_timeout_ms: int = Field(default=1000, ge=1, le=10_000, description=(
        "how long a WAL append waits for redis_wait_replicas replicas"))
    embedder: Literal["minilm", "mpnet", "sentence-transformers", "hash", "openai"] = Field(
        default="minilm", description=(
            "minilm: the packaged all-MiniLM-L6-v2; mpnet: the packaged all-mpnet-base-v2 "
            "(768-d, ~5x the compute; requirements-mpnet.txt); sentence-transformers: the "
            "local model directory st_model_path; hash: n-gram hashing (tests); openai: an "
            "OpenAI-compatible /embeddings endpoint (docs/providers.md)"))
    st_model_path: Path | None = Field(default=None, description=(
        "with embedder=sentence-transformers: a local directory holding a "
        "sentence-transformers model (modules.json, config.json, weights); never downloaded"))
    summarizer: Literal["rules", "openai"] = "rules"
    extractor: Literal["rules", "openai"] = "rules"
    intent_detector: Literal["learned", "rules"] = Field(default="learned", description=(
        "how a user turn's forget is read at once: 'learned' (a linear model fitted from the "
        "packaged labelled corpus, with the rules; strata/extract/intent_model.py) or "
        "'rules' (the hand-written patterns only)"))
    fact_reader: Literal["learned", "rules"] = Field(default="learned", description=(
        "how the session-end extraction reads a turn's facts: 'learned' (the rules, with "
        "linear models fitted from the packaged facts corpus adding the categories they "
        "missed, reading the packaged lexicon and gazetteer too; strata/extract/"
        "fact_model.py) or 'rules' (the hand-written patterns only)"))
    forget_grace_s: float = Field(default=86_400.0, ge=0.0, le=7 * 86_400.0, description=(
        "how long a forget said in conversation can be undone "
        "(POST /v1/users/{user_id}/forgets/{forget_id}/undo): the memories it names are "
        "hidden at once and deleted, text and all, when this has passed (0: at the shard's "
        "next sweep); at most the forget log's 7 days"))
    enricher: Literal["none", "openai"] = Field(default="none", description=(
        "write-time enrichment, off the recall path: 'openai' has the chat model "
        "(openai_base_url, openai_chat_model) write keywords a later question may use for "
        "each turn-level episode; the episode's vector embeds its text with them "
        "(strata/extract/enrich.py); one model call per turn at extraction"))
    query_expander: Literal["rules", "openai"] = Field(default="rules", description=(
        "recall's optional LLM path: 'openai' has the chat model (openai_base_url, "
        "openai_chat_model) write statements the person asked about might have said, each "
        "searched beside the question (strata/recall/expansion.py); adds the model's "
        "latency to every recall of the personal layers"))
    query_expansions: int = Field(default=4, ge=1, le=8, description=(
        "the most statements one question is expanded into"))
    query_expansion_timeout_s: float = Field(default=10.0, gt=0, description=(
        "past this the question is searched alone"))
    queue_warn_depth: int = Field(default=1000, ge=1,
                                  description="log a warning when a queue backlog passes this")
    openai_chat_model: str = "gpt-4o-mini"
    hash_dim: int = Field(default=256, ge=16, le=4096)
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: str = ""
    openai_embed_model: str = "text-embedding-3-small"
    openai_embed_dim: int = 1536
    openai_timeout_s: float = Field(default=30.0, gt=0, description=(
        "each call to the OpenAI-compatible embeddings endpoint is cut at this"))
    openai_retries: int = Field(default=2, ge=0, le=10, description=(
        "retries of a failed embeddings call (429, 5xx, timeouts; never a refused key), "
        "each after the server's Retry-After or an exponential backoff"))
    openai_retry_max_wait_s: float = Field(default=30.0, gt=0, description=(
        "the longest wait before a retry; a server that asks for longer is not retried"))
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=8000, ge=1, le=65535)
    ray_dashboard_port: int = Field(default=8265, ge=0, le=65535, description=(
        "the dashboard (and job API) of the local Ray that `strata serve` starts; taken or "
        "0: a free port (written to <data_dir>/ray.json). Unused with RAY_ADDRESS"))
    api_keys: dict[str, ApiKey] = Field(
        default_factory=dict,
        description='JSON: {"<key>": {"tenant": "acme", "role": "admin"}}. Empty → dev key.',
    )
    tenant_recipes: dict[str, str] = Field(default_factory=dict, description=(
        'JSON: {"<tenant>": "<recipe>"}: the recall recipe (scenario profile) of a '
        "tenant's recalls when neither the request nor its key names one"))
    # Vector store flush policy (see docs/benchmarks.md for the measurements behind it).
    flush_unflushed_rows: int = Field(default=500, ge=1)
    flush_interval_s: float = Field(default=2.0, gt=0)
    # Working memory: a verbatim window of 6–10 turns.
    window_turns: int = Field(default=8, ge=6, le=10)
    session_shards: int = Field(default=2, ge=1, le=256)
    extractors: int = Field(default=1, ge=0, le=64)
    demo_knowledge: bool = Field(default=True, description="seed the demo knowledge base "
                                 "(local default only: no API keys configured)")
    session_ttl_s: float = Field(default=600.0, gt=0, description="idle → snapshot + evict")
    session_idle_extract_s: float = Field(default=1800.0, gt=0,
                                          description="idle → intermediate extraction")
    max_sessions_per_shard: int = Field(default=50_000, ge=1)
    archive_retention_days: int = Field(default=14, ge=7, le=30)
    snapshot_every_turns: int = Field(default=3, ge=1)
    snapshot_every_tokens: int = Field(default=500, ge=1)
    max_turn_bytes: int = Field(default=32 * 1024, ge=256,
                                description="a turn's content plus its metadata (JSON)")
    max_body_bytes: int = Field(default=8 * 2**20, ge=1024, description=(
        "the largest HTTP request body; a larger one is refused (413) before it is read"))
    # Rate limits (token buckets, strata/ratelimit.py; docs/deploy.md): 0 is no limit, the
    # default — a laptop or a benchmark is never refused; a shared service sets its own.
    rate_limit_key_per_s: float = Field(default=0.0, ge=0, description=(
        "requests a second each API key may make, sustained (429 with Retry-After past it); "
        "0: no per-key limit. A key's own rate_per_s overrides it"))
    rate_limit_key_burst: int = Field(default=0, ge=0, description=(
        "requests a key may make at once above its rate (the bucket's size); 0: one "
        "second's worth of the rate"))
    rate_limit_tenant_per_s: float = Field(default=0.0, ge=0, description=(
        "requests a second all keys of one tenant may make together; 0: no per-tenant limit"))
    rate_limit_tenant_burst: int = Field(default=0, ge=0, description=(
        "the tenant's bucket size; 0: one second's worth of its rate"))
    # The hot index: each shard serves its recently recalled users' long-term memory from
    # process memory (strata/stores/hot.py); Milvus stays the durable store.
    hot_index_max_bytes: int = Field(default=512 * 2**20, ge=2**20, description=(
        "per shard: least recently used users leave the index above this estimate"))
    hot_index_ttl_s: float = Field(default=1800.0, gt=0, description=(
        "a user idle this long leaves the index"))
    hot_snapshots: bool = Field(default=True, description=(
        "keep each idle hot user's index in an encrypted local file (its key in Redis) and "
        "load the user from it while nothing has written them since, instead of from the "
        "vector store (strata/stores/hot_snapshot.py)"))
    hot_snapshot_dir: Path | None = Field(default=None, description=(
        "where the snapshot files live, on the node's local disk; empty means "
        "<data_dir>/hot-snapshots"))
    hot_snapshot_idle_s: float = Field(default=60.0, gt=0, description=(
        "a hot user idle this long gets a snapshot file (if theirs is not current)"))
    hot_snapshot_max_bytes: int = Field(default=4 * 2**30, ge=0, description=(
        "the snapshot directory's cap on a node: the oldest files go above it"))
    torch_threads: int = Field(default=0, ge=0, description=(
        "torch threads of each process that runs the model (0: the machine's cores; Ray "
        "would give a fractional-CPU actor one); ONNX Runtime's threads too"))
    embed_runtime: Literal["auto", "onnx", "torch"] = Field(default="auto", description=(
        "what runs a local embedding model's forward pass: ONNX Runtime (the same vectors "
        "at a fraction of torch's CPU for short texts; the graph is exported once per node "
        "and checked against torch), torch, or auto: ONNX Runtime where it is installed and "
        "reproduces torch's vectors, torch otherwise"))
    onnx_cache_dir: Path | None = Field(default=None, description=(
        "where the exported ONNX graphs are kept; empty means $XDG_CACHE_HOME/strata/onnx "
        "(~/.cache/strata/onnx)"))
    query_embedding: Literal["shard", "embedder"] = Field(default="shard", description=(
        "where a recall's query is embedded: in the user's shard (one hop; the shard has "
        "the model for its writes) or by the Embedder deployment, batched, concurrently "
        "with the shard call"))
    shard_embedding: Literal["own", "embedder"] = Field(default="own", description=(
        "what the session shards embed with: their own copy of the model (~400 MB of "
        "memory per shard for MiniLM; a recall's query is embedded in the shard, one hop) "
        "or the shared Embedder deployment (no model in a shard; every write and every "
        "query the shard embeds is a call to it, slower under load)"))
    knowledge_refresh_s: float = Field(default=5.0, gt=0, description=(
        "recall reads a copy of each tenant's knowledge base, reloaded this often (an "
        "import through the same ingress is seen at once)"))
    gc_freeze: bool = Field(default=True, description=(
        "after a shard's warm-up (its model) and an ingress replica's start, move the "
        "objects made so far into Python's permanent generation (gc.freeze): a full "
        "collection then scans what requests made, not the ~0.5M objects of the model's "
        "libraries (~0.2 s of every thread's time per full pass otherwise)"))
    hot_persist_every_s: float = Field(default=10.0, gt=0, description=(
        "how often recall reinforcement (access counts) is written to the vector store; "
        "a crash loses at most this much of it, never a memory"))
    followups_per_session: int = Field(default=2, ge=0, le=10, description=(
        "proactive recall: most follow-ups proposed in one session"))
    followup_cooldown_s: float = Field(default=7 * 86400, ge=0, description=(
        "proactive recall: a topic proposed once is not proposed again for this long "
        "(dismissed: 30 days; used: never again)"))
    followup_min_age_s: float = Field(default=12 * 3600, ge=0, description=(
        "proactive recall: a plan is followed up once it is at least this old"))
    rebalance_every_s: float = Field(default=30.0, ge=0, description=(
        "how often the placement keeper checks that the session shards are spread over "
        "the nodes, moving at most one shard a round (a node that joined waits a round); "
        "0 turns rebalancing off"))
    max_batch_turns: int = Field(default=500, ge=1, le=10_000,
                                 description="most turns in one batch append")
    knowledge_secrets: Literal["mask", "refuse"] = Field(default="mask", description=(
        "a knowledge document that holds a credential or a card or ID number: imported with "
        "it masked ([REDACTED:<kind>]), or refused whole (the import answers 422)"))
    metrics_auth: Literal["admin", "none"] = Field(default="admin", description=(
        "who may read /metrics: an admin key (Prometheus sends it as a bearer token), or "
        "anyone who reaches the port (only behind a network boundary of your own)"))
    # OpenTelemetry tracing of turns and recalls (docs/tracing.md): ids and counts, no content
    tracing: Literal["none", "console", "otlp"] = Field(default="none", description=(
        "where spans go: nowhere (no OpenTelemetry code runs), the console (one JSON span "
        "a line, to tracing_console_path or stderr), or an OTLP/HTTP collector "
        "(tracing_endpoint: Jaeger, Tempo, an OpenTelemetry Collector)"))
    tracing_endpoint: str = Field(default="http://localhost:4318/v1/traces", description=(
        "with tracing=otlp: the collector's OTLP/HTTP traces URL"))
    tracing_console_path: str = Field(default="", description=(
        "with tracing=console: a file every process appends its spans to; empty: stderr"))
    tracing_sample_ratio: float = Field(default=1.0, ge=0, le=1, description=(
        "the share of requests traced (a traced request is traced on every hop)"))

    @model_validator(mode="after")
    def _known_recipes(self) -> Settings:
        named = [k.recipe for k in self.api_keys.values() if k.recipe]
        unknown = sorted({r for r in [*named, *self.tenant_recipes.values()] if r not in RECIPES})
        if unknown:
            raise ValueError(f"unknown recall recipe(s) {unknown}; one of {sorted(RECIPES)}")
        return self

    @field_validator("data_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        # the settings travel to actors and jobs whose working directory is another one
        return value.absolute()

    @field_validator("milvus_uri")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    @property
    def resolved_milvus_uri(self) -> str:
        """The Milvus URI to connect to, defaulting to a lite file in the data dir."""
        return self.milvus_uri or str(self.data_dir / "milvus.db")

    @property
    def resolved_hot_snapshot_dir(self) -> Path:
        """Where a node's hot snapshot files live (``hot_snapshot_dir`` or the data dir's)."""
        return (self.hot_snapshot_dir or self.data_dir / "hot-snapshots").absolute()

    @property
    def milvus_is_lite(self) -> bool:
        """True when the vector store is a milvus-lite file owned by one process."""
        return not self.resolved_milvus_uri.startswith(("http://", "https://", "tcp://"))
