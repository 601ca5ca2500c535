"""cluster.yaml and serve_config.yaml validate against Ray's own schemas."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config
from ray.serve.schema import ServeDeploySchema

ROOT = Path(__file__).resolve().parents[2]


def test_cluster_yaml_is_a_valid_launcher_config() -> None:
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    validate_config(prepare_config(config))
    assert set(config["available_node_types"]) == {"head", "worker"}
    assert any("make install" in c for c in config["setup_commands"])
    assert any("strata serve" in c for c in config["head_start_ray_commands"])


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
