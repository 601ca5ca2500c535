"""Test doubles: real code behind the product's ports, for tests and benches only.

- ``strata.testing.fake_vectors.FakeVectorStore``: the ``VectorStore`` port in dicts.

No product module imports this package (``tests/unit/test_structure.py`` checks it).
"""
