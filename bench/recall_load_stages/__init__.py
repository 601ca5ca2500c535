"""The stages of ``bench/recall_load.py``, one module each.

``corpus``: the users, memories, knowledge chunks and queries, and their vectors;
``owner_probe``: code run inside the StoreOwner (calls counted per store method, milvus-lite
drained after a phase); ``baseline``: the single-collection design, loaded in the owner and
served by a second Serve application; ``store_level``: the serial comparison without HTTP;
``report``: the load phases' series, tables and JSON. CPU accounting per process group is
``bench.common.process_cpu``, the app itself ``bench.common.local_app``.
"""

AUTH = {"Authorization": "Bearer dev"}
TENANT = "default"
