"""Issue #17: the TypeScript client (``clients/typescript``) run with node against the real
Serve app, and its generated types checked against the live ``/openapi.json``.

The package is installed with ``npm ci`` when its ``node_modules`` is missing (the only
network use: the npm registry) and built with its pinned ``tsc``; its node tests then call
the live service with two tenants' keys, and the README's example runs as written. The
committed ``openapi.json`` must equal the live document, and generating from it must give
the committed ``src/schema.ts``: an API change without ``npm run generate`` fails here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from live import live_app

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "clients" / "typescript"
NODE = shutil.which("node")
NPM = shutil.which("npm")
ACME, GLOBEX, ACME_ADMIN = "acme-key", "globex-key", "acme-admin-key"
LIVE_TESTS = 10  # the test() calls of test/live.test.mjs: none may be skipped

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (.ci/run installs it)")


def _run(*args: str, env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=PACKAGE, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, check=False)


@pytest.fixture(scope="module")
def package() -> Path:
    """The package installed (``npm ci`` once, from the committed lock file) and built."""
    assert NPM is not None, "node is installed but npm is not"
    assert NODE is not None
    version = _run(NODE, "--version").stdout.strip()
    assert int(version.lstrip("v").split(".")[0]) >= 18, f"the client needs node 18+, not {version}"
    if not (PACKAGE / "node_modules").is_dir():
        installed = _run(NPM, "ci", "--no-audit", "--no-fund")
        assert installed.returncode == 0, installed.stdout + installed.stderr
    built = _run(NPM, "run", "build")
    assert built.returncode == 0, built.stdout + built.stderr
    return PACKAGE


@pytest.fixture(scope="module")
def base(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_app(tmp_path_factory.mktemp("typescript-client"), embedder="hash", hash_dim=64,
                  session_shards=2, extractors=0,
                  api_keys={ACME: {"tenant": "acme", "role": "agent"},
                            GLOBEX: {"tenant": "globex", "role": "agent"},
                            ACME_ADMIN: {"tenant": "acme", "role": "admin"}}) as (url, _):
        yield url


def _changed(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The paths and schemas that differ between two OpenAPI documents (for the message)."""
    def parts(doc: dict[str, Any]) -> dict[str, Any]:
        return {**{f"path {k}": v for k, v in doc.get("paths", {}).items()},
                **{f"schema {k}": v
                   for k, v in doc.get("components", {}).get("schemas", {}).items()},
                **{k: v for k, v in doc.items() if k not in ("paths", "components")}}
    before, after = parts(old), parts(new)
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _counts(tap: str) -> dict[str, int]:
    """The summary lines of node's test reporter (``# pass 9``, ``# fail 0``, …)."""
    return {name: int(n) for name, n in re.findall(r"^# (\w+) (\d+)$", tap, re.MULTILINE)}


def _node_test(package: Path, script: str, env: dict[str, str] | None = None) -> dict[str, int]:
    assert NODE is not None
    ran = _run(NODE, "--test", "--test-reporter=tap", f"test/{script}", env=env, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return _counts(ran.stdout)


def test_the_client_s_calls_against_the_live_service(package: Path, base: str) -> None:
    counts = _node_test(package, "live.test.mjs", env={
        "STRATA_URL": base, "STRATA_KEY": ACME, "STRATA_OTHER_KEY": GLOBEX,
        "STRATA_ADMIN_KEY": ACME_ADMIN})
    assert counts["fail"] == 0 and counts["skipped"] == 0, counts
    assert counts["pass"] == LIVE_TESTS, counts


def _readme_example() -> str:
    """The ```js block of the README's "### TypeScript" section."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n### TypeScript\n", 1)[1].split("\n### ", 1)[0]
    return section.split("```js\n", 1)[1].split("```", 1)[0]


def test_the_readme_example_runs_as_written(package: Path, base: str, tmp_path: Path) -> None:
    example = _readme_example()
    assert '"http://127.0.0.1:8000"' in example and 'apiKey: "dev"' in example
    script = tmp_path / "example.mjs"  # the example as a user runs it, on this service's port
    script.write_text(example.replace('"http://127.0.0.1:8000"', json.dumps(base))
                      .replace('apiKey: "dev"', f'apiKey: "{ACME}"'), encoding="utf-8")
    installed = tmp_path / "node_modules" / "@strata-memory" / "client"
    installed.parent.mkdir(parents=True)
    installed.symlink_to(package, target_is_directory=True)  # what `npm install <path>` makes
    assert NODE is not None
    ran = subprocess.run([NODE, str(script)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "window seat" in ran.stdout
    assert "preference.seat = window" in ran.stdout
    assert "422 invalid_input" in ran.stdout


def test_retries_turn_ids_and_errors_against_a_scripted_server(package: Path) -> None:
    counts = _node_test(package, "retry.test.mjs")
    assert counts["fail"] == 0 and counts["skipped"] == 0 and counts["pass"] >= 12, counts


def test_the_generated_types_match_the_live_openapi_document(package: Path, base: str) -> None:
    live = httpx.get(f"{base}/openapi.json", timeout=30).json()
    committed = json.loads((package / "openapi.json").read_text(encoding="utf-8"))
    assert committed == live, ("the API changed (" + ", ".join(_changed(committed, live))
                               + "): run `npm run generate` in clients/typescript")
    assert NPM is not None
    checked = _run(NPM, "run", "check:types")  # openapi-typescript --check: regenerate, compare
    assert checked.returncode == 0, \
        f"src/schema.ts is not what openapi.json generates: run `npm run generate`\n" \
        f"{checked.stdout}{checked.stderr}"
