"""``MESH_*`` environment variables by their full name: which name a setting, which are someone else's.

Kept apart from :mod:`server.config` (which loads and validates): the settings model is passed in,
so this module imports nothing of it.

An unknown ``MESH_*`` variable is **not fatal**: ``MESH_`` is a common prefix (service meshes use it),
and one stray variable must not keep the server from starting. It is ignored with a warning naming it
in full; ``doctor`` and ``server_info`` list it. A known variable with an invalid value is an error
naming the variable (:func:`env_origin`).
"""

from __future__ import annotations

import logging
import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

NOT_SETTINGS = ("MESH_TEST_", "MESH_DEMO_")
"""Prefixes of variables read by others (the test suite, ``mesh-mcp demo``), not settings."""
READ_ELSEWHERE = ("MESH_CONFIG", "MESH_HTTP_TOKEN", "MESH_STANDALONE")
"""Variables that are not settings: the config file, HTTP mode's bearer token, serve's shared-server switch."""
SHORT_FORMS = {"MESH_WORKSPACE": "workspace", "MESH_REDIS_URL": "redis__url", "MESH_STATE_DIR": "state_dir"}


def env_path(name: str) -> list[str]:
    """The settings path a ``MESH_*`` variable names (``MESH_REDIS__URL`` -> ``["redis", "url"]``)."""
    path = SHORT_FORMS.get(name) or name[len("MESH_") :].lower()
    return [p for p in path.split("__") if p]


def is_setting_variable(name: str) -> bool:
    """``name`` is a ``MESH_*`` variable meant as a setting (known or not)."""
    return name.startswith("MESH_") and not name.startswith(NOT_SETTINGS) and name not in READ_ELSEWHERE


def _unwrap(annotation: Any) -> Any:
    """``X`` of ``X | None``; anything else unchanged."""
    if get_origin(annotation) in (Union, types.UnionType):
        kept = [a for a in get_args(annotation) if a is not type(None)]
        return kept[0] if len(kept) == 1 else annotation
    return annotation


def names_a_setting(model: Any, parts: list[str]) -> bool:
    """``parts`` is a path of ``model`` (a key of a table such as ``services`` is free)."""
    for part in parts:
        if get_origin(model) is dict:
            model = _unwrap(get_args(model)[1])
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
            return False
        model = _unwrap(model.model_fields[part].annotation)
    return bool(parts)


def unknown_variables(model: Any, environ: Any) -> list[str]:
    """The ``MESH_*`` variables of ``environ`` that name no setting of ``model``, sorted."""
    return sorted(name for name in environ if is_setting_variable(name) and not names_a_setting(model, env_path(name)))


def without_unknown(model: Any, environ: dict[str, str]) -> dict[str, str]:
    """``environ`` without the unknown ``MESH_*`` variables, each logged as a warning naming it in full."""
    unknown = unknown_variables(model, environ)
    for name in unknown:
        logging.getLogger("mesh.config").warning(
            "unknown environment variable %s ignored: it names no setting (see docs/configuration.md)", name)
    return {k: v for k, v in environ.items() if k not in unknown}


def env_origin(err: ValidationError, environ: dict[str, str], origin: str) -> str:
    """``environment variable MESH_X`` when the first invalid value came from that variable, else ``origin``."""
    loc = [str(p) for p in err.errors()[0]["loc"]]
    for name in environ:
        if is_setting_variable(name) and env_path(name) == loc[: len(env_path(name))]:
            return f"environment variable {name}"
    return origin
