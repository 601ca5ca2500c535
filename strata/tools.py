"""Strata's memory as tools an LLM can call: OpenAI-style definitions and their dispatcher.

Each tool is one pydantic model of its arguments (the JSON schema the model sees, and the
validation of what it sends) and one function of a ``Client``::

    from strata import Client
    from strata.tools import dispatch, openai_tools

    strata = Client("http://127.0.0.1:8000", api_key="dev")
    tools = openai_tools(bound=("user_id",))        # the app, not the model, names the user
    ...                                             # the model answers with a tool call
    result = dispatch(strata, call.function.name, call.function.arguments, user_id="ann")

Arguments named in ``bound`` are left out of the schemas and supplied by the application
when it dispatches; a model that sends another value for one is refused. Errors the model
can act on (bad arguments, an unknown memory id, a limit) come back as
``{"error", "detail"}``; errors it cannot (a wrong API key, the service down) are raised.
The same tools are served over MCP by ``strata.mcp_server``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from strata import errors
from strata.client import AsyncClient, Client

__all__ = ["TOOLS", "MemoryTool", "adispatch", "dispatch", "openai_tools", "tool_schema"]

# errors the calling model can correct by calling differently; the rest are the app's
_MODEL_ERRORS = (errors.InvalidInput, errors.NotFound, errors.Conflict, errors.LimitExceeded)
BINDABLE = frozenset({"user_id", "session_id"})

UserId = Field(description="The id of the user whose memory this is.")


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AddTurnArgs(_Args):
    user_id: str = UserId
    session_id: str = Field(description="The conversation this turn belongs to.")
    role: Literal["user", "assistant"] = Field(description="Who said it.")
    content: str = Field(min_length=1, description="What was said, verbatim.")


class RecallArgs(_Args):
    user_id: str = UserId
    query: str = Field(min_length=1, max_length=4000,
                       description="The question or task to find memories for, in the "
                                   "user's words.")
    session_id: str | None = Field(default=None,
                                   description="The current conversation, to include what was "
                                               "just said.")
    budget_tokens: int = Field(default=500, ge=50, le=8000,
                               description="Largest size of the returned context, in tokens.")


class RememberArgs(_Args):
    user_id: str = UserId
    kind: Literal["fact", "episode"] = Field(
        default="fact", description="'fact': a lasting attribute with a key and a value "
                                    "(a new value replaces the old one and keeps its history); "
                                    "'episode': something that happened, in text.")
    key: str | None = Field(default=None, max_length=200,
                            description="For a fact: a short dotted name, e.g. "
                                        "'preference.seat', 'diet.allergy', 'home.city'.")
    value: str | None = Field(default=None, max_length=2000,
                              description="For a fact: its value, e.g. 'window'.")
    text: str | None = Field(default=None, max_length=8000,
                             description="For an episode (or a fact's wording): one sentence "
                                         "about the user.")

    @model_validator(mode="after")
    def _complete(self) -> RememberArgs:
        if self.kind == "fact" and not (self.key and (self.value or self.text)):
            raise ValueError("a fact needs key and value")
        if self.kind == "episode" and not self.text:
            raise ValueError("an episode needs text")
        return self


class ForgetArgs(_Args):
    user_id: str = UserId
    memory_id: str = Field(description="The id of the memory to delete, as returned by "
                                       "recall, search_memories or list_memories.")


class SearchMemoriesArgs(_Args):
    user_id: str = UserId
    query: str = Field(min_length=1, max_length=200,
                       description="Words to look for in the user's memories.")
    kind: Literal["fact", "episode", "procedure"] | None = Field(
        default=None, description="Only memories of this kind.")
    limit: int = Field(default=20, ge=1, le=100, description="Most memories to return.")


class ListMemoriesArgs(_Args):
    user_id: str = UserId
    kind: Literal["fact", "episode", "procedure"] | None = Field(
        default=None, description="Only memories of this kind.")
    status: Literal["active", "superseded", "pending", "cold", "archived"] | None = Field(
        default=None, description="Only memories in this state; 'active' is what is "
                                  "currently believed.")
    limit: int = Field(default=20, ge=1, le=100, description="Most memories to return.")


class CloseSessionArgs(_Args):
    user_id: str = UserId
    session_id: str = Field(description="The conversation to close.")
    wait: bool = Field(default=True, description=(
        "Wait until what the conversation taught is stored (the extraction job is done), "
        "so that recall sees it at once."))


class JobStatusArgs(_Args):
    user_id: str = UserId
    job_id: str = Field(description="The extraction_job id that close_session returned.")
    wait: bool = Field(default=False, description="Wait until the job is done or failed.")
    timeout_s: float = Field(default=30.0, gt=0, le=120,
                             description="Longest wait, in seconds.")


class SearchKnowledgeArgs(_Args):
    query: str = Field(min_length=1, max_length=4000,
                       description="What to look up in the documentation.")
    top_k: int = Field(default=5, ge=1, le=20, description="Most passages to return.")


def _recall(client: Any, a: RecallArgs) -> Any:
    return client.recall(a.user_id, a.query, session_id=a.session_id,
                         budget_tokens=a.budget_tokens)


def _remember(client: Any, a: RememberArgs) -> Any:
    return client.remember(a.user_id, kind=a.kind, key=a.key, value=a.value, text=a.text)


def _search(client: Any, a: SearchMemoriesArgs) -> Any:
    return client.memories(a.user_id, kind=a.kind, q=a.query, limit=a.limit)


def _list(client: Any, a: ListMemoriesArgs) -> Any:
    return client.memories(a.user_id, kind=a.kind, status=a.status, limit=a.limit)


def _close(client: Any, a: CloseSessionArgs) -> Any:
    return client.close_session(a.session_id, a.user_id, wait=a.wait)


def _job_status(client: Any, a: JobStatusArgs) -> Any:
    if a.wait:
        return client.wait_for(a.job_id, timeout_s=a.timeout_s, user_id=a.user_id)
    return client.job(a.job_id, user_id=a.user_id)


@dataclass(frozen=True)
class MemoryTool:
    """One tool: its name, what it is for (the model reads this), its arguments, and the
    ``Client`` call it makes (the same call for ``Client`` and ``AsyncClient``)."""

    name: str
    description: str
    arguments: type[_Args]
    call: Callable[[Any, Any], Any]
    read_only: bool


TOOLS: dict[str, MemoryTool] = {t.name: t for t in (
    MemoryTool("recall", "Recall what is known that helps answer the user's current message: "
               "what was just said, facts the user told before, past episodes, how-to "
               "procedures and documentation, as one labelled context. Call it before "
               "answering anything that may depend on the user's preferences or history.",
               RecallArgs, _recall, True),
    MemoryTool("remember", "Store a memory about the user when they state something worth "
               "keeping (a preference, an allergy, where they live, a decision). Use a fact "
               "with a key and a value for an attribute; a newer value replaces the old one.",
               RememberArgs, _remember, False),
    MemoryTool("forget", "Delete one memory (and its history) when the user asks to forget "
               "it or it is wrong. Find its id with search_memories first.",
               ForgetArgs, lambda c, a: c.forget(a.user_id, a.memory_id), False),
    MemoryTool("search_memories", "Search the user's stored memories by words; returns each "
               "memory with its id, kind, status and text.", SearchMemoriesArgs, _search, True),
    MemoryTool("list_memories", "List the user's stored memories, optionally "
               "only one kind or status.", ListMemoriesArgs, _list, True),
    MemoryTool("search_knowledge", "Search the documentation (the knowledge base) for "
               "passages about a topic; returns the passages with their document ids.",
               SearchKnowledgeArgs, lambda c, a: c.search_knowledge(a.query, a.top_k), True),
    MemoryTool("add_turn", "Record one turn of the conversation in the user's memory (only "
               "if the application does not record turns itself).",
               AddTurnArgs, lambda c, a: c.add_turn(a.session_id, a.user_id, a.role, a.content),
               False),
    MemoryTool("close_session", "Close a conversation when it ends: what it taught about the "
               "user is then stored as long-term memory (with wait, before this returns).",
               CloseSessionArgs, _close, False),
    MemoryTool("job_status", "Whether a closed conversation's memories are stored yet: the "
               "extraction job's status (queued, running, done, failed) and what it wrote.",
               JobStatusArgs, _job_status, True),
)}


def tool_schema(tool: MemoryTool, bound: Iterable[str] = ()) -> dict[str, Any]:
    """The JSON schema of a tool's arguments, without the ``bound`` ones."""
    schema: dict[str, Any] = _plain(tool.arguments.model_json_schema())
    for name in bound:
        schema["properties"].pop(name, None)
    required = [n for n in schema.pop("required", []) if n not in bound]
    return {**schema, "required": required} if required else schema


def openai_tools(bound: Iterable[str] = (),
                 names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Tool definitions for OpenAI-style function calling (``tools=`` of a chat completion).

    ``bound``: arguments the application supplies to ``dispatch`` (``user_id``,
    ``session_id``); ``names``: a subset of the tools (default: all).
    """
    bound = _check_bound(bound)
    picked = [TOOLS[n] for n in names] if names is not None else list(TOOLS.values())
    return [{"type": "function", "function": {
        "name": t.name, "description": t.description, "parameters": tool_schema(t, bound)}}
        for t in picked]


def dispatch(client: Client, name: str, arguments: str | Mapping[str, Any] | None,
             **bound: str) -> dict[str, Any]:
    """Validate a model's tool call and run it against ``client``; the JSON-able answer.

    ``arguments`` as the model sent them (a JSON string or a dict); ``bound``: the values
    of the arguments the application fixes (see ``openai_tools``).
    """
    prepared = _prepare(name, arguments, bound)
    if isinstance(prepared, dict):
        return prepared
    tool, parsed = prepared
    try:
        return _result(tool.call(client, parsed))
    except _MODEL_ERRORS as exc:
        return _error(exc.code, exc.detail)
    except ValueError as exc:  # an id the SDK refuses to put in a URL
        return _error("invalid_input", str(exc))


async def adispatch(client: AsyncClient, name: str, arguments: str | Mapping[str, Any] | None,
                    **bound: str) -> dict[str, Any]:
    """``dispatch`` for an ``AsyncClient``."""
    prepared = _prepare(name, arguments, bound)
    if isinstance(prepared, dict):
        return prepared
    tool, parsed = prepared
    try:
        pending: Awaitable[Any] = tool.call(client, parsed)
        return _result(await pending)
    except _MODEL_ERRORS as exc:
        return _error(exc.code, exc.detail)
    except ValueError as exc:  # an id the SDK refuses to put in a URL
        return _error("invalid_input", str(exc))


def _prepare(name: str, arguments: str | Mapping[str, Any] | None,
             bound: Mapping[str, str]) -> tuple[MemoryTool, _Args] | dict[str, Any]:
    """The tool and its validated arguments, or the error for the model."""
    _check_bound(bound)
    tool = TOOLS.get(name)
    if tool is None:
        return _error("unknown_tool", f"no tool {name!r}; one of {sorted(TOOLS)}")
    try:
        given = json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})
    except json.JSONDecodeError as exc:
        return _error("invalid_input", f"arguments are not JSON: {exc}")
    if not isinstance(given, dict):
        return _error("invalid_input", "arguments must be a JSON object")
    fields = tool.arguments.model_fields
    for key, value in bound.items():
        if key not in fields:
            continue
        if given.get(key, value) != value:
            return _error("invalid_input", f"{key} is fixed by the application")
        given[key] = value
    try:
        return tool, tool.arguments.model_validate(given)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                             for e in exc.errors())
        return _error("invalid_input", problems)


def _check_bound(bound: Iterable[str]) -> tuple[str, ...]:
    names = tuple(bound)
    unknown = set(names) - BINDABLE
    if unknown:
        raise ValueError(f"only {sorted(BINDABLE)} can be bound; got {sorted(unknown)}")
    return names


def _result(answer: Any) -> dict[str, Any]:
    return answer if isinstance(answer, dict) else {"result": answer}


def _error(code: str, detail: str) -> dict[str, Any]:
    return {"error": code, "detail": detail}


def _plain(schema: Any) -> Any:
    """Pydantic's schema as a model reads it best: no titles, ``X | None`` as ``X``."""
    if isinstance(schema, list):
        return [_plain(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    options = schema.get("anyOf")
    if options and {"type": "null"} in options and schema.get("default", 0) is None:
        rest = [o for o in options if o != {"type": "null"}]
        schema = {**{k: v for k, v in schema.items() if k not in ("anyOf", "default")},
                  **(rest[0] if len(rest) == 1 else {"anyOf": rest})}
    return {k: _plain(v) for k, v in schema.items() if k != "title"}
