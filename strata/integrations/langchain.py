"""Strata's memory tools (``strata.tools``) as LangChain tools, for one user.

The user is fixed when a tool is made, so the model never chooses whose memory it reads::

    from strata import Client
    from strata.integrations.langchain import strata_tools

    tools = strata_tools(user_id="ann", client=Client("http://127.0.0.1:8000", api_key="dev"))
    llm_with_tools = chat_model.bind_tools(tools)

Each tool has the schema, description and validation of its ``strata.tools`` twin (they are
built from it) and answers the JSON of the same dispatcher: mistakes the model can fix come
back as ``{"error", "detail"}``; a wrong key or a service that is down raise. ``invoke`` uses
``client``, ``ainvoke`` ``aclient``.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from langchain_core.tools import BaseTool

from strata.client import AsyncClient, Client
from strata.tools import TOOLS, adispatch, dispatch, tool_schema

__all__ = [
    "StrataForgetTool",
    "StrataListMemoriesTool",
    "StrataMemoryTool",
    "StrataRecallTool",
    "StrataRememberTool",
    "StrataSearchKnowledgeTool",
    "StrataSearchMemoriesTool",
    "strata_tools",
]


class StrataMemoryTool(BaseTool):
    """One ``strata.tools`` tool, bound to a user (and optionally a session)."""

    strata_tool: ClassVar[str]
    user_id: str
    session_id: str | None = None
    client: Client | None = None
    aclient: AsyncClient | None = None

    def __init__(self, *, user_id: str, client: Client | None = None,
                 aclient: AsyncClient | None = None, session_id: str | None = None,
                 **kwargs: Any) -> None:
        if client is None and aclient is None:
            raise ValueError("a Strata tool needs a strata.Client, a strata.AsyncClient or both")
        spec = TOOLS[self.strata_tool]
        bound = ("user_id", "session_id") if session_id else ("user_id",)
        kwargs.setdefault("name", spec.name)
        kwargs.setdefault("description", spec.description)
        kwargs.setdefault("args_schema", tool_schema(spec, bound))
        super().__init__(user_id=user_id, session_id=session_id, client=client,
                         aclient=aclient, **kwargs)

    def _bound(self) -> dict[str, str]:
        bound = {"user_id": self.user_id}
        if self.session_id:
            bound["session_id"] = self.session_id
        return bound

    def _run(self, **arguments: Any) -> str:
        if self.client is None:
            raise RuntimeError(f"{self.name}: no strata.Client; call ainvoke or pass client=")
        return json.dumps(dispatch(self.client, self.strata_tool, arguments, **self._bound()))

    async def _arun(self, **arguments: Any) -> str:
        if self.aclient is None:
            raise RuntimeError(f"{self.name}: no strata.AsyncClient; call invoke or pass "
                               "aclient=")
        return json.dumps(await adispatch(self.aclient, self.strata_tool, arguments,
                                          **self._bound()))


class StrataRecallTool(StrataMemoryTool):
    """What is known that helps answer the user's message, as one labelled context."""

    strata_tool = "recall"


class StrataRememberTool(StrataMemoryTool):
    """Store a fact (key and value; a new value supersedes) or an episode about the user."""

    strata_tool = "remember"


class StrataForgetTool(StrataMemoryTool):
    """Delete one of the user's memories, with its history."""

    strata_tool = "forget"


class StrataSearchMemoriesTool(StrataMemoryTool):
    """Search the user's stored memories by words."""

    strata_tool = "search_memories"


class StrataListMemoriesTool(StrataMemoryTool):
    """List the user's stored memories, of one kind or status."""

    strata_tool = "list_memories"


class StrataSearchKnowledgeTool(StrataMemoryTool):
    """Search the tenant's knowledge base."""

    strata_tool = "search_knowledge"


TOOL_CLASSES: tuple[type[StrataMemoryTool], ...] = (
    StrataRecallTool, StrataRememberTool, StrataForgetTool, StrataSearchMemoriesTool,
    StrataListMemoriesTool, StrataSearchKnowledgeTool)


def strata_tools(user_id: str, client: Client | None = None, aclient: AsyncClient | None = None,
                 names: tuple[str, ...] | None = None) -> list[StrataMemoryTool]:
    """Strata's memory tools for ``user_id`` (``names``: a subset, e.g. ``("recall",
    "remember")``; default: all but ``add_turn``, which the application records itself)."""
    classes = {cls.strata_tool: cls for cls in TOOL_CLASSES}
    unknown = set(names or ()) - set(classes)
    if unknown:
        raise ValueError(f"no Strata tool {sorted(unknown)}; one of {sorted(classes)}")
    return [classes[n](user_id=user_id, client=client, aclient=aclient)
            for n in (names or tuple(classes))]
