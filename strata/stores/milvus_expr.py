"""Milvus filter expressions: ``RecordFilter`` within a scope, and visibility
(``strata.models.is_visible``) as an expression. Used by the Milvus adapter only."""

from __future__ import annotations

import json

from strata.models import RecordFilter, Scope

__all__ = ["filter_expr", "lit", "num", "visible_expr"]


def lit(value: str) -> str:
    """A Milvus expression string literal (JSON escaping is what the parser accepts)."""
    return json.dumps(value, ensure_ascii=False)


def num(value: float | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def filter_expr(scope: Scope, flt: RecordFilter | None) -> str:
    """The Milvus expression of ``flt`` within ``scope`` (the scope always comes first, so no
    expression reaches another scope's rows)."""
    parts = [f"scope == {lit(scope.key)}"]
    if flt is not None:
        if flt.statuses is not None:
            parts.append(f"status in {json.dumps(flt.statuses, ensure_ascii=False)}")
        if flt.ids is not None:
            pks = [f"{scope.key}|{i}" for i in flt.ids]
            parts.append(f"pk in {json.dumps(pks, ensure_ascii=False)}")
        if flt.created_after is not None:
            parts.append(f"created_at >= {num(flt.created_after)}")
        if flt.created_before is not None:
            parts.append(f"created_at <= {num(flt.created_before)}")
        if flt.event_from is not None:
            parts.append(f'payload["event_time"] >= {lit(flt.event_from)}')
        if flt.event_before is not None:
            parts.append(f'payload["event_time"] < {lit(flt.event_before)}')
        for op, items in (("==", flt.payload_equals), ("!=", flt.payload_not_equals)):
            for key, value in items.items():
                rhs = lit(value) if isinstance(value, str) else num(value)
                path = "".join(f'["{part}"]' for part in key.split("."))
                parts.append(f"payload{path} {op} {rhs}")
        if flt.visible_to is not None:
            parts.append(visible_expr(flt.visible_to))
    return " and ".join(parts)


def visible_expr(viewer: str) -> str:
    """``strata.models.is_visible`` as a Milvus expression (a row without the field is
    shared; a comparison with a missing JSON key is never true, so ``exists`` says it)."""
    hidden = ('(not exists payload["visibility"] or (payload["visibility"] != "private" '
              'and payload["visibility"] != "agents"))')
    if not viewer:
        return hidden
    mine = f'payload["agent"] == {lit(viewer)}'
    named = (f'(payload["visibility"] == "agents" and '
             f'json_contains(payload["shared_with"], {lit(viewer)}))')
    return f"({hidden} or {mine} or {named})"
