"""cluster.yaml and serve_config.yaml validate against Ray's own schemas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config
from ray.serve.schema import ServeDeploySchema

from strata.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_cluster_yaml_is_a_valid_launcher_config() -> None:
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    validate_config(prepare_config(config))
    assert set(config["available_node_types"]) == {"head", "worker"}
    assert any("make install" in c for c in config["setup_commands"])
    assert any("strata serve" in c for c in config["head_start_ray_commands"])


def test_cluster_yaml_joins_strata_to_the_cluster_with_the_token_and_keys() -> None:
    """`strata serve` joins the launcher's Ray (not a private one), every start command loads
    the same env file, and that file's example carries the token mode and valid keys."""
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    serve = [c for c in config["head_start_ray_commands"] if "strata serve" in c]
    assert len(serve) == 1 and "RAY_ADDRESS=127.0.0.1:6379" in serve[0]
    starts = [c for c in config["head_start_ray_commands"] + config["worker_start_ray_commands"]
              if "ray stop" not in c]
    assert starts and all(". ~/strata.env" in c for c in starts), starts
    assert config["file_mounts"]["/home/ubuntu/strata.env"] == "./deploy/strata.env"
    example = dict(line.split("=", 1) for line in
                   (ROOT / "deploy" / "strata.env.example").read_text().splitlines()
                   if line and not line.startswith("#"))
    assert example["RAY_AUTH_MODE"] == "token" and "RAY_AUTH_TOKEN" in example
    keys = json.loads(example["STRATA_API_KEYS"].strip("'"))
    assert Settings(api_keys=keys).api_keys


def test_cluster_yaml_validation_catches_mistakes() -> None:
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    config["head_node_type"] = "missing"
    with pytest.raises(ValueError):
        validate_config(prepare_config(config))


def test_serve_config_names_the_typed_builder() -> None:
    schema = ServeDeploySchema.model_validate(
        yaml.safe_load((ROOT / "serve_config.yaml").read_text()))
    app = schema.applications[0]
    assert app.import_path == "serve_app.app:build_app"
    from serve_app.app import AppArgs

    AppArgs.model_validate(app.args)


def test_the_deployed_app_refuses_to_build_without_api_keys() -> None:
    """serve_config.yaml listens on 0.0.0.0: without keys the development key would be open."""
    from serve_app.app import build_app

    args = yaml.safe_load((ROOT / "serve_config.yaml").read_text())["applications"][0]["args"]
    assert args["require_api_keys"] is True
    with pytest.raises(ValueError, match="STRATA_API_KEYS"):
        build_app({**args, "settings": {"api_keys": {}}})
    build_app({**args, "settings": {"api_keys": {"k": {"tenant": "acme"}}}})
