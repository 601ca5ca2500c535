"""The session shard: one process's share of the users, their sessions and their memory.

``SessionShardService`` (``service``) composes the shard's parts, each a plain class given
what it needs at construction:

- ``sessions.ShardSessions``: live sessions' working memory, the Redis WAL, snapshots, the
  idle / archive sweeps (``durability``: replay and snapshots; ``turns``: what a turn may be);
- ``longterm.ShardMemories``: the single writer of the users' long-term memory (explicit
  intents, the memories API, decay, import), over ``longterm.LazyLongTerm``;
- ``recall.ShardRecall``: the shard's half of a recall; ``followups.ShardFollowUps``;
- ``erasure.ShardErasure``: deletes that cascade through both halves.

``models`` holds the request / response models; ``ring`` maps users onto shards.
"""
