"""The ``strata`` command.

``strata serve`` hands over to ``serve_app.main`` (imported lazily: the domain package never
imports Ray; only this entry point reaches the Ray wiring). The other commands talk to a
running Strata over HTTP through ``strata.Client`` (``--url``/``STRATA_URL``,
``--api-key``/``STRATA_API_KEY``). ``strata mcp`` serves Strata's memory tools to an MCP
client over stdio, through the same ``Client``.

The API key option is ``--api-key`` (``--key`` before the subcommand still works): the
``remember`` subcommand's ``--key`` is the fact's key, stored under its own name.

``main(argv, transport=...)`` sends the HTTP commands' requests through the given httpx
transport (an ``httpx.MockTransport`` in tests) instead of the network.

Why this module is long: it is the one argparse table of every subcommand, each a few lines
of parsing and a thin call to ``Client``; split up, the help text and the option names that
must not collide (``--key``) would live in several places.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from strata.client import IMPORT_CHUNK_BYTES, Client, RetryPolicy
from strata.errors import StrataError
from strata.layers.forgetting import FORGET_BOUND_S
from strata.portability import by_user
from strata.settings import Settings

__all__ = ["build_parser", "main"]


def _url(args: argparse.Namespace) -> str:
    return str(args.url or os.environ.get("STRATA_URL") or (
        f"http://127.0.0.1:{Settings().http_port}"))


def _api_key(args: argparse.Namespace) -> str:
    return str(args.api_key or os.environ.get("STRATA_API_KEY") or "dev")


def _client(args: argparse.Namespace, timeout_s: float = 30.0) -> Client:
    return Client(_url(args), api_key=_api_key(args), timeout_s=timeout_s,
                  transport=args.transport, retry=RetryPolicy(attempts=args.attempts))


def _print(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _serve(args: argparse.Namespace) -> int:
    _ray_auth_mode()  # before Ray is imported: it reads the mode once
    settings = Settings()
    if args.port:
        settings = settings.model_copy(update={"http_port": args.port})
    runner = importlib.import_module("serve_app.main")
    runner.serve_forever(settings)
    return 0


def _ray_auth_mode() -> None:
    """Ray 2.60's token authentication, decided as Ray decides it: the local Ray that
    `strata serve` starts uses it (with ~/.ray/auth_token, made if missing); a cluster at
    RAY_ADDRESS uses it once a token exists, and a driver must say so itself."""
    if "RAY_AUTH_MODE" in os.environ:
        return
    from pathlib import Path

    has_token = os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH") or (
        Path.home() / ".ray" / "auth_token").exists()
    if not os.environ.get("RAY_ADDRESS") or has_token:
        os.environ["RAY_AUTH_MODE"] = "token"


def _ready(args: argparse.Namespace) -> int:
    _print(_client(args).ready())
    return 0


def _recall(args: argparse.Namespace) -> int:
    result = _client(args).recall(args.user, args.query, session_id=args.session,
                                  budget_tokens=args.budget, debug=args.debug)
    if args.json or args.debug:
        _print(result)
    else:
        print(result["context"] or "(nothing recalled)")
    return 0


def _close(args: argparse.Namespace) -> int:
    ack = _client(args).close_session(args.session, args.user, wait=args.wait,
                                      timeout_s=args.timeout)
    _print(ack)
    return 1 if args.wait and (ack.get("job") or {}).get("status") == "failed" else 0


def _job_status(args: argparse.Namespace) -> int:
    client = _client(args)
    record = (client.wait_for(args.job_id, timeout_s=args.timeout) if args.wait
              else client.job(args.job_id))
    _print(record)
    return 1 if record.get("status") == "failed" else 0


def _remember(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"text": args.text}
    if args.fact_key:
        fields.update(key=args.fact_key, value=args.value or args.text)
    _print(_client(args).remember(args.user, kind=args.kind, **fields))
    return 0


def _forget(args: argparse.Namespace) -> int:
    client = _client(args)
    if not args.verify:
        _print(client.forget_user(args.user) if args.all else client.forget(args.user, args.id))
        return 0
    # the server deletes, then scans its own files; a server with none refuses first
    report = client.erase_verified(args.user, args.verify, memory_id=args.id,
                                   bound_s=args.bound)
    _print(report)
    return 0 if report["verify"]["forgotten"] else 1


def _memories(args: argparse.Namespace) -> int:
    _print(_client(args).memories(args.user, kind=args.kind, status=args.status, q=args.q))
    return 0


def _show(method: str) -> Callable[[argparse.Namespace], int]:
    """A command that prints what one argument-less ``Client`` method answers."""
    def run(args: argparse.Namespace) -> int:
        _print(getattr(_client(args), method)())
        return 0

    return run


def _users(args: argparse.Namespace) -> int:
    _print(_client(args).users(q=args.q, limit=args.limit))
    return 0


def _mcp(args: argparse.Namespace) -> int:
    try:
        from strata.mcp_server import serve_stdio
    except ImportError as exc:
        print(f"error: strata mcp needs the mcp extra (pip install "
              f"'strata-memory[mcp]'): {exc}", file=sys.stderr)
        return 1
    bound = {"user_id": args.user} if args.user else {}
    serve_stdio(_url(args), _api_key(args), RetryPolicy(attempts=args.attempts), bound)
    return 0


def _eval(args: argparse.Namespace) -> int:
    from pathlib import Path

    from strata.eval.locomo import evaluate, format_table

    ks = [int(k) for k in args.k.split(",")]
    client = _client(args, timeout_s=120.0)
    report = evaluate(client, Path(args.data), ks, args.recipe,
                      limit_conversations=args.limit, reuse_tag=args.reuse_tag)
    print(format_table(report))
    if args.out:
        Path(args.out).write_text(report.model_dump_json(indent=2))
    return 0


def _export(args: argparse.Namespace) -> int:
    client = _client(args)
    export = client.export_tenant() if args.user is None else client.export_user(args.user)
    if args.out:
        Path(args.out).write_text(export, encoding="utf-8")
        print(f"{max(0, export.count(chr(10)) - 1)} memories written to {args.out}",
              file=sys.stderr)
    else:
        sys.stdout.write(export)
    return 0


def _import(args: argparse.Namespace) -> int:
    if args.file is not None:  # strata import USER FILE: a user's memories
        export = Path(args.file).read_text(encoding="utf-8")
        if args.from_user:
            export = by_user(export).get(args.from_user, "")
            if not export:
                print(f"no memories of user {args.from_user!r} in {args.file}", file=sys.stderr)
                return 1
        _print(_client(args).import_user(args.path, export, chunk_bytes=args.chunk_bytes))
        return 0
    import yaml

    from strata.layers.knowledge import read_folder

    docs = [d.model_dump() for d in read_folder(Path(args.path))]
    if not docs:
        print(f"no .md or .txt documents under {args.path}", file=sys.stderr)
        return 1
    questions = yaml.safe_load(Path(args.validate).read_text()) if args.validate else None
    _print(_client(args).import_documents(docs, questions))
    return 0


def _job(args: argparse.Namespace) -> int:
    """Run a batch job against the running Strata: submitted to its Ray (``ray job submit``),
    or, with --local, run here as a driver that joins that Ray."""
    import subprocess
    from pathlib import Path

    from strata.runtime import RayEndpoint

    env = dict(os.environ)
    module = ["-m", f"jobs.{args.name}"]
    ray_cli = Path(sys.executable).parent / "ray"
    submit = [str(ray_cli) if ray_cli.exists() else "ray", "job", "submit"]
    if env.get("RAY_ADDRESS"):  # a cluster, addressed the way Ray's own tools are
        command = ([sys.executable, *module, *args.job_args] if args.local else
                   [*submit, "--working-dir", ".", "--", "python", *module, *args.job_args])
        return subprocess.call(command, env=env)
    data_dir = Settings().data_dir
    endpoint = RayEndpoint.read(data_dir)
    if endpoint is None:
        print(f"no running `strata serve` found: no live {RayEndpoint.path(data_dir)}; "
              "start it with `make run`, set STRATA_DATA_DIR to its data directory, or set "
              "RAY_ADDRESS to your cluster", file=sys.stderr)
        return 2
    if endpoint.auth_mode == "token":
        env.setdefault("RAY_AUTH_MODE", "token")  # the token is in ~/.ray/auth_token
    if args.local:
        env["RAY_ADDRESS"] = endpoint.gcs_address
        return subprocess.call([sys.executable, *module, *args.job_args], env=env)
    # the job runs on this machine, in Ray's working directory: files named by relative
    # paths are passed as absolute ones
    job_args = [str(Path(a).resolve()) if not a.startswith("-") and Path(a).exists() else a
                for a in args.job_args]
    return _submit([*submit, "--address", endpoint.dashboard_url, "--", "python", *module,
                    *job_args], env)


NO_AGENT = "No available agent to submit job"  # the dashboard's job agent is still starting


def _submit(command: list[str], env: dict[str, str], patience_s: float = 90.0) -> int:
    """``ray job submit``, its output passed through; sent again while Ray says its job agent
    is not up yet (right after `strata serve` started: no job was created, so it is safe)."""
    import subprocess
    import time

    deadline = time.monotonic() + patience_s
    while True:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        refused = False
        for line in proc.stdout:
            sys.stdout.write(line)
            refused = refused or NO_AGENT in line
        code = proc.wait()
        if code == 0 or not refused or time.monotonic() > deadline:
            return code
        print("strata: Ray's job agent is not up yet; submitting again in 3 s", file=sys.stderr)
        time.sleep(3)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1; got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strata", description="Layered memory for LLM agents.")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--url", default=None, help="a running Strata (default STRATA_URL)")
    parser.add_argument("--api-key", "--key", dest="api_key", default=None,
                        help="API key (default STRATA_API_KEY or dev); --key is the old "
                             "spelling, accepted before the subcommand")
    parser.add_argument("--attempts", type=_positive, default=4,
                        help="tries per request on 503 or connection errors (1: no retry)")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run Strata (local Ray, or RAY_ADDRESS)")
    serve.add_argument("--port", type=int, default=None, help="overrides STRATA_HTTP_PORT")
    serve.set_defaults(func=_serve)

    sub.add_parser("ready", help="is a running Strata ready?").set_defaults(func=_ready)

    recall = sub.add_parser("recall", help="recall the context for a query")
    recall.add_argument("user")
    recall.add_argument("query")
    recall.add_argument("--session", default=None)
    recall.add_argument("--budget", type=int, default=500)
    recall.add_argument("--debug", action="store_true")
    recall.add_argument("--json", action="store_true")
    recall.set_defaults(func=_recall)

    remember = sub.add_parser("remember", help="store a memory for a user")
    remember.add_argument("user")
    remember.add_argument("text")
    remember.add_argument("--kind", default="fact", choices=["fact", "episode"])
    remember.add_argument("--key", dest="fact_key", default=None,
                          help="the fact's key, e.g. preference.seat")
    remember.add_argument("--value", default=None, help="the fact's value (default: text)")
    remember.set_defaults(func=_remember)

    forget = sub.add_parser("forget", help="delete a memory, or everything about a user")
    forget.add_argument("user")
    group = forget.add_mutually_exclusive_group(required=True)
    group.add_argument("--id", default=None)
    group.add_argument("--all", action="store_true")
    forget.add_argument("--verify", metavar="PHRASE", default=None, help=(
        "the server then checks that PHRASE (which must be in what is forgotten) is in none "
        "of its files (the embedded Redis's AOF, milvus-lite), up to --bound seconds; "
        "exit 1 if some remains; a server with no such files refuses before deleting"))
    forget.add_argument("--bound", type=float, default=FORGET_BOUND_S,
                        help="seconds to wait for the purge (default: the documented bound)")
    forget.set_defaults(func=_forget)

    close = sub.add_parser("close", help="close a session (long-term extraction follows)")
    close.add_argument("session")
    close.add_argument("user")
    close.add_argument("--wait", action="store_true",
                       help="return once the extraction job is done or failed")
    close.add_argument("--timeout", type=float, default=60.0, help="seconds (with --wait)")
    close.set_defaults(func=_close)

    status = sub.add_parser("job-status", help=(
        "a queued job's status (the extraction_job of a close): queued, running, done, failed"))
    status.add_argument("job_id")
    status.add_argument("--wait", action="store_true", help="until done or failed")
    status.add_argument("--timeout", type=float, default=60.0, help="seconds (with --wait)")
    status.set_defaults(func=_job_status)

    memories = sub.add_parser("memories", help="list a user's memories")
    memories.add_argument("user")
    memories.add_argument("--kind", default=None)
    memories.add_argument("--status", default=None)
    memories.add_argument("--q", default=None)
    memories.set_defaults(func=_memories)

    users = sub.add_parser("users", help="the tenant's users that have long-term memory")
    users.add_argument("--q", default=None)
    users.add_argument("--limit", type=int, default=1000)
    users.set_defaults(func=_users)
    for name, what in (("whoami", "the API key's tenant and role"),
                       ("queues", "long-term write queues: backlog, lag"),
                       ("documents", "the knowledge base's documents")):
        sub.add_parser(name, help=what).set_defaults(func=_show(name))

    mcp = sub.add_parser("mcp", help="serve Strata's memory tools to an MCP client (stdio)")
    mcp.add_argument("--user", default=None,
                     help="bind every tool to this user (the tools then take no user_id)")
    mcp.set_defaults(func=_mcp)

    export = sub.add_parser("export", help="a user's memories as JSON Lines (no user: the "
                                           "whole tenant, admin key)")
    export.add_argument("user", nargs="?", default=None)
    export.add_argument("-o", "--out", default=None, help="write to this file, not stdout")
    export.set_defaults(func=_export)

    knowledge = sub.add_parser("import", help=(
        "import a folder into the knowledge base (import PATH), or an export's memories "
        "into a user (import USER FILE)"))
    knowledge.add_argument("path", help="the folder, or the user to import into")
    knowledge.add_argument("file", nargs="?", default=None, help="an export (JSON Lines)")
    knowledge.add_argument("--from-user", default=None,
                           help="with FILE from a tenant export: that user's lines only")
    knowledge.add_argument("--chunk-bytes", type=_positive, default=IMPORT_CHUNK_BYTES,
                           help="bytes per request (under the server's body limit)")
    knowledge.add_argument("--validate", default=None, help="YAML: [{question, expect_doc_id}]")
    knowledge.set_defaults(func=_import)

    job = sub.add_parser("job", help="run a Ray job: knowledge_import, decay_sweep, reembed")
    job.add_argument("name", choices=["knowledge_import", "decay_sweep", "reembed"])
    job.add_argument("--local", action="store_true", help="run here instead of ray job submit")
    job.add_argument("job_args", nargs=argparse.REMAINDER)
    job.set_defaults(func=_job)

    evaluation = sub.add_parser("eval", help="retrieval evaluation against a running Strata")
    evaluation.add_argument("suite", choices=["locomo"])
    evaluation.add_argument("--data", required=True, help="folder of LoCoMo-format JSON files")
    evaluation.add_argument("--recipe", default=None)
    evaluation.add_argument("--k", default="5,10,20")
    evaluation.add_argument("--out", default=None)
    evaluation.add_argument("--limit", type=int, default=None, help="first N conversations")
    evaluation.add_argument("--reuse-tag", default=None,
                            help="question the users an earlier run ingested (skip ingestion)")
    evaluation.set_defaults(func=_eval)
    return parser


def main(argv: Sequence[str] | None = None,
         transport: httpx.BaseTransport | None = None) -> int:
    """Run the ``strata`` command; ``transport`` carries the HTTP commands' requests
    (default: the network)."""
    args = build_parser().parse_args(argv)
    args.transport = transport
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        result: int = args.func(args)
    except StrataError as exc:
        print(f"error: {exc.detail}", file=sys.stderr)
        return 1
    except ValueError as exc:  # an id the SDK refuses to put in a URL, before any request
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
