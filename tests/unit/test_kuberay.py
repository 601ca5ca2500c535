"""deploy/kuberay/rayservice.yaml validates against KubeRay's RayService CRD; static checks of
the Dockerfile.

Neither Kubernetes nor Docker runs where these tests run: the manifest is checked against the
CRD's openAPIV3Schema (vendored from KubeRay v1.7.0, see tests/data/kuberay/README.txt) with
unknown fields refused, as `kubectl apply` does with strict field validation. CEL rules
(`x-kubernetes-validations`) and the operator's own checks are not evaluated; the ones that
matter here (token auth needs rayVersion >= 2.52) are asserted directly.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from ray.serve.schema import ServeDeploySchema

from serve_app.app import AppArgs

ROOT = Path(__file__).resolve().parents[2]
RAYSERVICE = ROOT / "deploy" / "kuberay" / "rayservice.yaml"
SECRET = ROOT / "deploy" / "kuberay" / "secret.example.yaml"
CRD = ROOT / "tests" / "data" / "kuberay" / "ray.io_rayservices.yaml.gz"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


def strict_schema(node: Any) -> Any:
    """The CRD's OpenAPI schema as a JSON Schema that behaves like the API server.

    ``x-kubernetes-int-or-string`` without a type becomes integer-or-string, and objects with
    declared properties refuse unknown ones (strict field validation) unless the schema
    preserves unknown fields.
    """
    if isinstance(node, list):
        return [strict_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: strict_schema(value) for key, value in node.items()}
    if out.get("x-kubernetes-int-or-string") and "type" not in out and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    crd = yaml.safe_load(gzip.decompress(CRD.read_bytes()))
    assert crd["spec"]["names"]["kind"] == "RayService"
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = strict_schema(version["schema"]["openAPIV3Schema"])
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    cls.check_schema(schema)
    return cls(schema)


@pytest.fixture()
def manifest() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(RAYSERVICE.read_text())
    return loaded


def containers(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = manifest["spec"]["rayClusterConfig"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    return [c for group in groups for c in group["template"]["spec"]["containers"]]


def errors(validator: jsonschema.protocols.Validator, doc: dict[str, Any]) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]


# -- the manifest against the CRD -----------------------------------------------------------

def test_rayservice_validates_against_the_crd(validator, manifest) -> None:
    assert manifest["apiVersion"] == "ray.io/v1"
    assert manifest["kind"] == "RayService"
    assert errors(validator, manifest) == []


@pytest.mark.parametrize(("where", "mutate"), [
    ("replicas as a string", lambda m: m["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
     .__setitem__("replicas", "two")),
    ("authOptions.mode outside its enum", lambda m: m["spec"]["rayClusterConfig"]
     ["authOptions"].__setitem__("mode", "password")),
    ("a container port as a string", lambda m: containers(m)[0]["ports"][0]
     .__setitem__("containerPort", "6379")),
    ("a misspelt field", lambda m: m["spec"]["rayClusterConfig"].__setitem__(
        "authOption", {"mode": "token"})),
    ("serveConfigV2 as a mapping", lambda m: m["spec"].__setitem__(
        "serveConfigV2", {"applications": []})),
])
def test_crd_validation_catches_mistakes(validator, manifest, where, mutate) -> None:
    broken = copy.deepcopy(manifest)
    mutate(broken)
    assert errors(validator, broken), f"{where} passed the CRD schema"


def test_token_auth_is_on_with_a_ray_that_supports_it(manifest) -> None:
    cluster = manifest["spec"]["rayClusterConfig"]
    assert cluster["authOptions"]["mode"] == "token"
    # KubeRay refuses token auth below Ray 2.52; rayVersion must be the image's Ray.
    assert tuple(int(p) for p in cluster["rayVersion"].split(".")[:2]) >= (2, 52)
    assert f"ARG RAY_VERSION={cluster['rayVersion']}\n" in DOCKERFILE.read_text()
    assert '"ray[serve]==${RAY_VERSION}"' in DOCKERFILE.read_text()


# -- serveConfigV2 is serve_config.yaml's application ---------------------------------------

def test_serve_config_v2_is_the_typed_application(manifest) -> None:
    schema = ServeDeploySchema.model_validate(yaml.safe_load(manifest["spec"]["serveConfigV2"]))
    (app,) = schema.applications
    assert app.import_path == "serve_app.app:build_app"
    assert app.route_prefix == "/"
    AppArgs.model_validate(app.args)
    assert schema.http_options.port == 8000


def test_serve_config_v2_equals_serve_config_yaml(manifest) -> None:
    embedded = yaml.safe_load(manifest["spec"]["serveConfigV2"])
    local = yaml.safe_load((ROOT / "serve_config.yaml").read_text())
    assert embedded["applications"] == local["applications"]
    assert embedded["http_options"] == local["http_options"]


# -- the pods -------------------------------------------------------------------------------

def test_every_ray_container_has_the_same_strata_env(manifest) -> None:
    envs = [c["env"] for c in containers(manifest)]
    assert all(env == envs[0] for env in envs), "head and worker env differ"
    by_name = {e["name"]: e for e in envs[0]}
    assert by_name["STRATA_MILVUS_URI"]["value"].startswith(("http://", "https://"))
    assert by_name["STRATA_REDIS_URL"]["value"].startswith(("redis://", "rediss://"))
    assert by_name["STRATA_HTTP_HOST"]["value"] == "0.0.0.0"
    # Keys come from the Secret, never inline, and the pod does not start without them.
    keys = by_name["STRATA_API_KEYS"]
    assert "value" not in keys
    assert keys["valueFrom"]["secretKeyRef"].get("optional", False) is False


def test_the_example_secret_holds_keys_strata_accepts(manifest) -> None:
    from strata.settings import ApiKey

    secret = yaml.safe_load(SECRET.read_text())
    ref = next(e for e in containers(manifest)[0]["env"] if e["name"] == "STRATA_API_KEYS")
    assert secret["kind"] == "Secret"
    assert secret["metadata"]["name"] == ref["valueFrom"]["secretKeyRef"]["name"]
    keys = json.loads(secret["stringData"][ref["valueFrom"]["secretKeyRef"]["key"]])
    assert keys
    for key in keys.values():
        ApiKey.model_validate(key)


def test_every_container_serves_on_8000_with_bounded_resources(manifest) -> None:
    for container in containers(manifest):
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["serve"] == 8000, container["name"]
        limits, requests = container["resources"]["limits"], container["resources"]["requests"]
        # requests == limits for memory: a pod over its request is the first one evicted.
        assert limits["memory"] == requests["memory"]
        assert int(re.fullmatch(r"(\d+)Gi", limits["memory"]).group(1)) >= 4


def test_no_probe_waits_for_the_serve_app_on_the_head(manifest) -> None:
    # KubeRay submits serveConfigV2 only once the head pod is Ready: a head probe on the
    # Serve app (/readyz) would keep it from ever becoming Ready.
    head = manifest["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
    for container in head["containers"]:
        assert "readinessProbe" not in container
        assert "startupProbe" not in container


# -- the Dockerfile (static checks: no Docker daemon here) ----------------------------------

def dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1])
            for line in lines if line and not line.startswith("#")]


def test_dockerfile_installs_cpu_torch_before_the_package() -> None:
    runs = [arg for op, arg in dockerfile_instructions() if op == "RUN"]
    torch_at = next(i for i, r in enumerate(runs) if "download.pytorch.org/whl/cpu" in r)
    package_at = next(i for i, r in enumerate(runs) if '".[local]"' in r)
    assert torch_at < package_at
    assert "torch==${TORCH_VERSION}" in runs[torch_at]
    assert "ARG TORCH_VERSION=2.13.0" in DOCKERFILE.read_text()


def test_dockerfile_runs_offline_as_a_non_root_user_with_what_kuberay_needs() -> None:
    instructions = dockerfile_instructions()
    envs = " ".join(arg for op, arg in instructions if op == "ENV")
    assert "HF_HUB_OFFLINE=1" in envs
    assert instructions[0] == ("FROM", "python:3.11-slim")
    users = [arg for op, arg in instructions if op == "USER"]
    assert users and users[-1].split(":")[0] not in {"0", "root"}
    runs = " ".join(arg for op, arg in instructions if op == "RUN")
    assert "wget" in runs  # KubeRay's exec probes run wget in the Ray container
    assert "redis-server" not in runs
    exposed = {p for op, arg in instructions if op == "EXPOSE" for p in arg.split()}
    assert {"8000", "8265"} <= exposed


def test_every_file_the_dockerfile_copies_exists_and_is_in_the_context() -> None:
    rules = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert rules[0] == "*"  # an allow-list: only what is un-ignored below is sent
    allowed = {rule[1:].strip("/") for rule in rules if rule.startswith("!")}
    copies = [arg.split() for op, arg in dockerfile_instructions() if op == "COPY"]
    sources = {s.removeprefix("./") for args in copies for s in args[:-1]
               if not s.startswith("--")}
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: no such file"
        assert source in allowed, f"COPY {source}: left out by .dockerignore"
    # Every package pyproject.toml installs is copied, and its readme.
    # (a regex, not tomllib: the project supports Python 3.10)
    pyproject = (ROOT / "pyproject.toml").read_text()
    include = re.search(r"^include = \[(.*)\]$", pyproject, re.MULTILINE)
    assert include is not None
    packages = {p.strip(' "*') for p in include.group(1).split(",")}
    readme = re.search(r'^readme = "(.+)"$', pyproject, re.MULTILINE)
    assert readme is not None
    assert packages | {"pyproject.toml", readme.group(1)} <= sources
