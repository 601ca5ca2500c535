// Writes openapi.json, the OpenAPI document the types are generated from.
//
//   npm run snapshot                                  # from the FastAPI app object (no Ray start)
//   STRATA_URL=http://127.0.0.1:8000 npm run snapshot # from a running service's /openapi.json
//
// Without STRATA_URL it runs the repository's Python (STRATA_PYTHON, else ../../.venv/bin/python)
// to build the ingress's FastAPI app the way serve_app/ingress.py does and print its document.
import { execFileSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const packageDir = resolve(here, "..");
const repoRoot = resolve(packageDir, "../..");

async function fromService(url) {
  const resp = await fetch(new URL("/openapi.json", url));
  if (!resp.ok) throw new Error(`${url}/openapi.json answered ${resp.status}`);
  return resp.json();
}

function fromAppObject() {
  const venv = resolve(repoRoot, ".venv/bin/python");
  const python = process.env.STRATA_PYTHON ?? (existsSync(venv) ? venv : "python3");
  const code = "import json, sys\nfrom serve_app.ingress import api\njson.dump(api.openapi(), sys.stdout)";
  const out = execFileSync(python, ["-c", code], { cwd: repoRoot, maxBuffer: 64 * 1024 * 1024 });
  return JSON.parse(out.toString("utf8"));
}

const url = process.env.STRATA_URL;
const document = url ? await fromService(url) : fromAppObject();
const target = resolve(packageDir, "openapi.json");
writeFileSync(target, JSON.stringify(document, null, 2) + "\n");
console.log(`wrote ${target} (${Object.keys(document.paths).length} paths, from ${url ?? "the app object"})`);
