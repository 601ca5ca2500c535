"""A LangGraph graph whose memory is Strata: ``StrataStore`` as the graph's ``store``.

The node is deterministic (no LLM): "remember <key> is <value>" keeps a preference, and any
other message is answered from the preferences that match it. Against a running Strata
(``make run``)::

    pip install -e '.[langgraph]'
    python examples/langgraph_memory.py --url http://127.0.0.1:8000 --api-key dev --user ann

Each preference is a Strata fact of the user (key = the preference, value = the item's JSON,
scope tag ``langgraph:preferences``): it shows in ``strata memories ann`` and the inspector,
recall finds it, and a new value supersedes the old one with its history kept.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from strata import Client
from strata.integrations.langgraph import StrataStore

REMEMBER = re.compile(r"remember (?:that )?(?:my )?(?P<key>[\w ]+?) is (?P<value>.+)", re.I)


class Turn(TypedDict):
    user_id: str
    message: str
    reply: str


def memory_node(turn: Turn, *, store: BaseStore) -> dict[str, str]:
    """Keep a stated preference, or answer from the preferences that match the message."""
    namespace = (turn["user_id"], "preferences")
    stated = REMEMBER.fullmatch(turn["message"].strip().rstrip("."))
    if stated:
        key = stated["key"].strip().lower().replace(" ", "_")
        store.put(namespace, key, {"text": f"{stated['key']} is {stated['value']}",
                                   "value": stated["value"]})
        return {"reply": f"Noted: {stated['key']} is {stated['value']}."}
    found = store.search(namespace, query=turn["message"], limit=3)
    if not found:
        return {"reply": "I don't know that yet."}
    return {"reply": "From memory: " + "; ".join(i.value["text"] for i in found) + "."}


def build_graph(store: BaseStore) -> Any:
    """One node, START → memory → END, compiled with ``store``."""
    builder = StateGraph(Turn)
    builder.add_node("memory", memory_node)
    builder.add_edge(START, "memory")
    builder.add_edge("memory", END)
    return builder.compile(store=store)


def main(argv: Sequence[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--api-key", default="dev")
    parser.add_argument("--user", default="ann")
    parser.add_argument("messages", nargs="*", default=[
        "Remember my seat is window", "Which seat do I like?",
        "Remember my seat is aisle", "Which seat do I like?"])
    args = parser.parse_args(argv)
    replies = []
    with Client(args.url, api_key=args.api_key) as client:
        graph = build_graph(StrataStore(client))
        for message in args.messages:
            reply = graph.invoke({"user_id": args.user, "message": message, "reply": ""})
            print(f"> {message}\n{reply['reply']}")
            replies.append(reply["reply"])
    return replies


if __name__ == "__main__":
    main()
