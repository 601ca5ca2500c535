"""``build_app(args)``: the typed Serve application builder named by serve_config.yaml."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from ray.serve import Application

from serve_app.embedder import EmbedderDeployment
from serve_app.ingress import IngressDeployment
from strata.settings import Settings

__all__ = ["AppArgs", "build_app"]

HEAD_NODE = "node:__internal_head__"  # the resource Ray gives the head node only


class AppArgs(BaseModel):
    """Arguments of the Strata application.

    ``settings`` overrides what the environment says (STRATA_* variables are read here,
    at the entry point, when ``serve run serve_config.yaml`` builds the app).
    """

    settings: dict[str, Any] = Field(default_factory=dict)
    namespace: str | None = "strata"
    embedder_replicas: int = Field(default=1, ge=1)
    ingress_replicas: int = Field(default=1, ge=1)
    on_head: bool = Field(default=False, description=(
        "place every replica on the head node (`strata serve`: its one HTTP proxy is there, "
        "so a lost worker node cannot take the whole API down with it)"))
    require_api_keys: bool = Field(default=False, description=(
        "refuse to build without STRATA_API_KEYS: set where the proxy listens beyond "
        "127.0.0.1 (without keys the development key 'dev' is accepted)"))


def deployment_settings(args: AppArgs) -> dict[str, Any]:
    """The settings each deployment is built with, as plain JSON-able data."""
    merged = Settings(**args.settings)
    return merged.model_dump(mode="json")


def build_app(args: dict[str, Any] | AppArgs) -> Application:
    parsed = args if isinstance(args, AppArgs) else AppArgs.model_validate(args)
    settings = deployment_settings(parsed)
    if parsed.require_api_keys and not settings["api_keys"]:
        raise ValueError("STRATA_API_KEYS is required: this application listens beyond "
                         "127.0.0.1 and would otherwise accept the development key 'dev'")
    placed: dict[str, Any] = (
        {"ray_actor_options": {"num_cpus": 0, "resources": {HEAD_NODE: 0.001}}}
        if parsed.on_head else {})
    embedder = EmbedderDeployment.options(num_replicas=parsed.embedder_replicas,
                                          **placed).bind(settings)
    return IngressDeployment.options(num_replicas=parsed.ingress_replicas, **placed).bind(
        settings, embedder, parsed.namespace)
