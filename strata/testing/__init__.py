"""Test doubles: real code behind the product's ports, for tests and benches only.

- ``strata.testing.fake_vectors.FakeVectorStore``: the ``VectorStore`` port in dicts.
- ``strata.testing.fake_redis.FakeRedis``: Strata's Redis ports in this process, held to the
  same contract tests as ``RedisStore`` on a real Redis.

No product module imports this package (``tests/unit/test_structure.py`` checks it).
"""
