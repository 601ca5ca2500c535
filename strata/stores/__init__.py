"""Storage ports (Protocols) and their adapters: Milvus, Redis, embedders, in-memory doubles."""
