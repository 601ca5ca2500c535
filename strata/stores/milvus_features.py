"""What the Milvus behind a ``MilvusVectorStore`` can do, decided once from its version.

The store asks a server for its version before it sends any schema (a 2.3 server aborts,
SIGABRT, when asked for a sparse BM25 index) and adapts in one place:

=====================  ===========  ===============  ===============================
feature                milvus-lite  server >= 2.5    server 2.3 / 2.4
=====================  ===========  ===============  ===============================
BM25 function, sparse  yes          yes              no: BM25 scored client-side
nullable fields        yes          yes              no: ``tokens`` is "" when none
partial upsert         yes          2.6.2+           no: read the row, write it whole
scope partition key    yes          yes              2.4 yes; 2.3: a plain field
consistency            its default  Strong           Strong
query window           any limit    16,384 rows      16,384 rows: larger reads page
=====================  ===========  ===============  ===============================

Sparse vectors came in 2.4 but the BM25 function only in 2.5, and Strata needs both, so a
2.4 server is served like 2.3. On 2.3.5 an upsert into a partition-key collection deletes
the old row and the new one is never seen (measured here; Milvus issues #22750 and #31548
are upsert bugs of that line), so a 2.3 server's ``scope`` is an ordinary field: every
filter starts with it anyway, what is lost is partition pruning; 2.4 is assumed fixed (not
run here). A server's readers are other processes (shards, extractors, jobs each hold a
client), so its collections are made with Strong consistency: a fact an extractor wrote is
seen by the next recall of a shard. milvus-lite is one file in one process and keeps its
own defaults.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["MilvusFeatures", "parse_version"]

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int]:
    """``"v2.3.5"`` → ``(2, 3, 5)``; a version Milvus never printed is a ``ValueError``."""
    found = _VERSION.search(text)
    if found is None:
        raise ValueError(f"not a Milvus version: {text!r}")
    major, minor, patch = found.groups()
    return int(major), int(minor), int(patch or 0)


class MilvusFeatures(NamedTuple):
    """The capabilities the adapter depends on (see the module's table)."""

    version: str
    bm25_function: bool  # a sparse field filled by the server's BM25 function
    nullable_fields: bool
    partial_update: bool  # ``upsert(partial_update=True)`` merges instead of replacing
    partition_key: bool  # ``scope`` as the partition key (an upsert keeps its row)
    consistency_level: str | None  # given to ``create_collection``; None: the default
    query_window: int | None  # a query's largest offset + limit (None: no such cap)

    @classmethod
    def lite(cls) -> MilvusFeatures:
        """milvus-lite (3.x): everything, with its own consistency default."""
        return cls("lite", bm25_function=True, nullable_fields=True, partial_update=True,
                   partition_key=True, consistency_level=None, query_window=None)

    @classmethod
    def of_server(cls, version: str) -> MilvusFeatures:
        """A Milvus server of ``version`` (as ``get_server_version`` prints it)."""
        parsed = parse_version(version)
        return cls(version, bm25_function=parsed >= (2, 5, 0),
                   nullable_fields=parsed >= (2, 5, 0),
                   partial_update=parsed >= (2, 6, 2), partition_key=parsed >= (2, 4, 0),
                   consistency_level="Strong", query_window=16_384)
