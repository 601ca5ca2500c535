"""Strata: layered memory for LLM agents (working memory, facts, episodes, procedures,
knowledge base), served on Ray with Milvus and Redis underneath."""

__version__ = "0.1.0"

from strata.client import AsyncClient, Client

__all__ = ["AsyncClient", "Client", "__version__"]
