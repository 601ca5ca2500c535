"""Storage ports (Protocols) and their adapters: Milvus, Redis, embedders (the test doubles of
the ports are in ``strata.testing``)."""
