"""Strata: layered memory for LLM agents (working memory, facts, episodes, procedures,
knowledge base), served on Ray with Milvus and Redis underneath."""

__version__ = "0.1.0"

from strata.client import NO_RETRY, AsyncClient, Client, RetryPolicy

__all__ = ["NO_RETRY", "AsyncClient", "Client", "RetryPolicy", "__version__"]
