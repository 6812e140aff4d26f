"""Loading a configuration: the TOML file, the ``RECONCILER_...`` overrides (read by
pydantic-settings, written over the file's values: ``environment.py``), paths resolved
against the file's folder, and every problem gathered into one ``ConfigError`` by key path
(with a "did you mean" for a misspelt key, and each source's connector asked about its own
options)."""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

from pydantic import (
    BaseModel,
    ValidationError,
)

from reconciler.errors import ConfigError
from reconciler.settings.configuration import Settings
from reconciler.settings.shared import DEFAULT_CONFIG_NAME, ENV_PREFIX, ENV_RESERVED
from reconciler.settings.sources import SourceSettings
from reconciler.settings.table import TableSettings


def _overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``RECONCILER_...`` variables of ``environ`` that override keys (not the reserved
    ones), by name."""
    return {
        name: value
        for name, value in sorted(environ.items())
        if name.startswith(ENV_PREFIX) and name not in ENV_RESERVED
    }


def _resolve_paths(data: dict[str, Any], base: Path) -> None:
    """Make relative paths absolute against ``base`` (the config file's folder)."""

    def rel(value: Any) -> Any:
        if isinstance(value, str) and value.strip() and not Path(value).expanduser().is_absolute():
            return str((base / value).resolve())
        return value

    table = data.get("table")
    if isinstance(table, dict) and isinstance(table.get("url"), str):
        url = table["url"]
        if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
            rest = url[len("sqlite:///") :]
            db, sep, query = rest.partition("?")
            if db and db != ":memory:":
                table["url"] = f"sqlite:///{rel(db)}{sep}{query}"
    index = data.get("index")
    if isinstance(index, dict):
        for key in ("path", "api_key_file"):
            index[key] = rel(index.get(key)) if index.get(key) else index.get(key)
    metrics = data.get("metrics")
    if isinstance(metrics, dict) and metrics.get("textfile"):
        metrics["textfile"] = rel(metrics["textfile"])
    for source in data.get("sources") or []:
        if isinstance(source, dict) and source.get("path"):
            source["path"] = rel(source["path"])
        options = source.get("options") if isinstance(source, dict) else None
        if isinstance(options, dict):  # connector options named *_path, *_dir, *_file
            for key, value in options.items():
                if key.endswith(("_path", "_dir", "_file")):
                    options[key] = rel(value)


def _format_loc(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif str(item).startswith("function-") or str(item) in {"literal_error"}:
            continue
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "(top level)"


def load_settings(
    path: str | Path | None = None, *, environ: Mapping[str, str] | None = None
) -> Settings:
    """Load, override and validate the configuration; raise ConfigError listing every problem.

    ``path`` None means ``$RECONCILER_CONFIG``, else ``./reconciler.toml`` when it exists, else
    built-in defaults (relative paths then resolve against the working directory).
    """
    environ = os.environ if environ is None else environ
    if path is None:
        path = environ.get("RECONCILER_CONFIG") or None
    if path is None and Path(DEFAULT_CONFIG_NAME).is_file():
        path = DEFAULT_CONFIG_NAME
    data: dict[str, Any] = {}
    origin = "defaults"
    base = Path.cwd()
    if path is not None:
        file = Path(path).expanduser()
        origin = str(file)
        try:
            with file.open("rb") as handle:
                data = tomllib.load(handle)
        except FileNotFoundError:
            raise ConfigError(
                [
                    (
                        "(file)",
                        f"{file} does not exist; write the annotated example there with "
                        f"`reconciler config example > {file}`",
                    )
                ],
                origin=origin,
            ) from None
        except OSError as exc:
            raise ConfigError(
                [("(file)", f"cannot read {file}: {exc.strerror}")], origin=origin
            ) from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError([("(file)", f"not valid TOML: {exc}")], origin=origin) from None
        base = file.resolve().parent
    env_names: dict[str, str] = {}
    overrides = _overrides(environ)
    problems: list[tuple[str, str]] = []
    if overrides:
        # Loaded here, not at the top: pydantic-settings costs start-up time (environment.py).
        from reconciler.settings.environment import write_overrides  # noqa: PLC0415

        problems = write_overrides(data, overrides, env_names)
    index = data.setdefault("index", {})
    no_location = isinstance(index, dict) and not index.get("path") and not index.get("url")
    if no_location and index.get("engine", "qdrant") == "qdrant":
        index["path"] = "qdrant"  # the embedded default (Edge names its folder explicitly)
    table = data.setdefault("table", {})
    if isinstance(table, dict):
        table.setdefault("url", TableSettings.model_fields["url"].default)
    _resolve_paths(data, base)
    settings: Settings | None = None
    try:
        settings = Settings.model_validate({**data, "origin": origin})
    except ValidationError as exc:
        for error in exc.errors():
            loc = _format_loc(error["loc"])
            message = error["msg"]
            if error["type"] == "extra_forbidden":
                message = "unknown key" + _did_you_mean(error["loc"])
                if loc.rsplit(".", 1)[-1] in {"api_key", "password", "token", "secret"}:
                    message = (
                        "secrets are never read from the config file; name an environment "
                        "variable (..._env) or a file (..._file) instead"
                    )
            if message.startswith("Value error, "):
                message = message[len("Value error, ") :]
            env = env_names.get(loc.replace("[", ".").replace("]", ""))
            problems.append((loc, message + (f" (from {env})" if env else "")))
    problems += _connector_problems(data.get("sources"))
    if problems or settings is None:
        raise ConfigError(problems, origin=origin)
    return settings


def _section_of(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The settings model that holds the key at ``loc`` (list indices skipped)."""
    model: type[BaseModel] = Settings
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        candidates = [field.annotation, *get_args(field.annotation)]
        found = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        if not found:
            return None
        model = found[0]
    return model


def _did_you_mean(loc: tuple[Any, ...]) -> str:
    """``; did you mean 'url'?`` for a mistyped key, else ``""``."""
    model = _section_of(loc)
    if model is None or not loc:
        return ""
    known = [name for name in model.model_fields if name != "origin"]
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _connector_problems(sources: Any) -> list[tuple[str, str]]:
    """Each source's connector must be installed and accept its settings.

    Sources that already failed validation are skipped (their problems are listed already).
    """
    # Loaded here, not at the top: reading the entry points costs start-up time.
    from reconciler.sources import connector_class, installed  # noqa: PLC0415

    factory: Any

    problems: list[tuple[str, str]] = []
    for n, raw in enumerate(sources if isinstance(sources, list) else []):
        where = f"sources[{n}]"
        kind = raw.get("type") if isinstance(raw, dict) else None
        try:
            source = SourceSettings.model_validate(raw)
        except ValidationError:
            source = None  # its problems are listed already; an unknown type is listed too
        if isinstance(kind, str):
            try:
                factory = connector_class(kind)
            except LookupError:
                close = difflib.get_close_matches(kind, sorted(installed()), n=1)
                problems.append(
                    (
                        f"{where}.type",
                        f"no connector {kind!r} is installed"
                        + (f" (did you mean {close[0]!r}?)" if close else "")
                        + "; installed: "
                        + ", ".join(sorted(installed())),
                    )
                )
                continue
        if source is None or not isinstance(kind, str):
            continue
        check = getattr(factory, "config_problems", None)
        if check is not None:
            problems += [(f"{where}.{key}", message) for key, message in check(source)]
    return problems
