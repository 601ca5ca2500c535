"""The ``strata`` command.

``strata serve`` hands over to ``serve_app.main`` (imported lazily: the domain package
never imports Ray, and only this entry point reaches the Ray wiring).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from collections.abc import Sequence

import httpx

from strata.settings import Settings

__all__ = ["main"]


def _serve(args: argparse.Namespace) -> int:
    settings = Settings()
    if args.port:
        settings = settings.model_copy(update={"http_port": args.port})
    runner = importlib.import_module("serve_app.main")
    runner.serve_forever(settings)
    return 0


def _ready(args: argparse.Namespace) -> int:
    settings = Settings()
    url = args.url or f"http://127.0.0.1:{settings.http_port}"
    try:
        resp = httpx.get(f"{url}/readyz", timeout=60)
    except httpx.HTTPError as exc:
        print(f"not reachable: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(resp.json(), indent=2))
    return 0 if resp.status_code == 200 else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strata", description="Layered memory for LLM agents.")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run Strata (local Ray, or RAY_ADDRESS)")
    serve.add_argument("--port", type=int, default=None, help="overrides STRATA_HTTP_PORT")
    serve.set_defaults(func=_serve)
    ready = sub.add_parser("ready", help="ask a running Strata whether it is ready")
    ready.add_argument("--url", default=None)
    ready.set_defaults(func=_ready)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
