"""The ``RECONCILER_<SECTION>__<KEY>`` variables over a configuration file, read and nested by
pydantic-settings' environment source: from the variables the loader is given (not only
``os.environ``), a list item by its index (``RECONCILER_SOURCES__0__TTL``), each value its
text (never JSON: "3" and "null" are the strings they read as).

Loaded by ``load_settings`` when an override is set, not when ``reconciler.settings`` is
imported: pydantic-settings costs start-up time (20-60 ms of CPU) that ``--help`` and a
configuration without overrides do not need. The source's hooks overridden here
(``_load_env_vars``, ``next_field``, ``decode_complex_value``) are those of pydantic-settings
2.4 to 2.16, each tried against the loader's tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from reconciler.settings.configuration import Settings
from reconciler.settings.shared import ENV_NESTING, ENV_PREFIX


class _Variables(BaseSettings, Settings):
    """The shape the variables are read against: the configuration's, never validated here
    (the loader validates the file with the variables written in)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTING,
        case_sensitive=False,
        defer_build=True,
    )


class _Source(EnvSettingsSource):
    """pydantic-settings' environment source over the given variables; an index steps into a
    list item, and no value is decoded as JSON."""

    def __init__(self, variables: Mapping[str, str]) -> None:
        self._given = variables
        super().__init__(_Variables)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {name.lower(): value for name, value in self._given.items()}

    def next_field(
        self, field: FieldInfo | Any | None, key: str, case_sensitive: bool | None = None
    ) -> FieldInfo | None:
        annotation = field.annotation if isinstance(field, FieldInfo) else field
        if _index(key) and get_origin(annotation) in (tuple, list):
            return FieldInfo.from_annotation(get_args(annotation)[0])  # the item's model
        return super().next_field(field, key, case_sensitive)

    def decode_complex_value(self, field_name: str, field: FieldInfo | None, value: Any) -> Any:
        return value

    def takes_text(self, path: list[str]) -> bool:
        """Whether the key at ``path`` is a known one whose value is text (not a table, a list
        or a section)."""
        target: Any = self.settings_cls.model_fields.get(path[0]) if path[0] in _SECTIONS else None
        for key in path[1:]:
            target = self.next_field(target, key, self.case_sensitive)
        if isinstance(target, FieldInfo):
            return not self._field_is_complex(target)[0]
        if target is None:
            return False
        return get_origin(target) not in (dict, list, tuple) and not (
            isinstance(target, type) and issubclass(target, BaseModel)
        )


#: The sections a variable may name (``origin`` is where the file came from, set by the loader).
_SECTIONS = frozenset(Settings.model_fields) - {"origin"}


def write_overrides(
    data: dict[str, Any], overrides: Mapping[str, str], env_names: dict[str, str]
) -> list[tuple[str, str]]:
    """Write the variables ``overrides`` (``RECONCILER_...`` by name, sorted) into ``data``
    (the file's), as pydantic-settings reads and nests them. A variable that names no section
    is kept for validation to refuse ("did you mean"), as a misspelt table of the file is.
    Fills ``env_names`` (key path -> the variable that set it, for naming it beside a problem:
    pydantic-settings cannot say); returns the variables refused here: one that names no key
    (a list item by anything but its index), one under another that sets a text value."""
    source = _Source(overrides)
    refused: list[str] = []
    for section, values in source().items():
        data[section] = _written_over(data.get(section), values, section, refused)
    paths = {name: _key_path(name) for name in overrides}
    problems = []
    for name, path in paths.items():
        problem = _refusal(path, refused, paths, source)
        if problem:
            problems.append((name, problem))
            continue
        if path[0] not in _SECTIONS:
            data.setdefault(path[0], overrides[name])
        env_names.setdefault(".".join(path), name)
    for name, path in paths.items():
        for depth in range(1, len(path)):
            env_names.setdefault(".".join(path[:depth]), name)
    return problems


def _refusal(
    path: list[str], refused: list[str], paths: dict[str, list[str]], source: _Source
) -> str | None:
    """Why the variable that names ``path`` is refused, if it is: its key is no item of a list,
    or it is inside a text value another variable sets (which pydantic-settings keeps; a
    section's or a table's variable is refused by validation instead)."""
    dotted = ".".join(path)
    if any(dotted == bad or dotted.startswith(bad + ".") for bad in refused):
        return "does not name a configuration key"
    for other, outer in paths.items():
        if len(outer) < len(path) and path[: len(outer)] == outer and source.takes_text(outer):
            return f"names a key inside {_shown(outer)}, which {other} sets; set one of them"
    return None


def _key_path(name: str) -> list[str]:
    """``RECONCILER_SOURCES__0__TTL`` -> ``["sources", "0", "ttl"]``."""
    return name[len(ENV_PREFIX) :].lower().split(ENV_NESTING)


def _shown(path: list[str]) -> str:
    """``["sources", "0", "ttl"]`` -> ``sources[0].ttl``."""
    return "".join(f"[{p}]" if _index(p) else ("." if n else "") + p for n, p in enumerate(path))


def _written_over(base: Any, values: Any, path: str, refused: list[str]) -> Any:
    """``base`` (the file's value at ``path``) with ``values`` (as the source nests them)
    written in: a key set over a list, or over no table with an index first, is an item's index
    (the items between made empty); a value that is no table replaces what was there. A key
    over a list that is no index is left out, its path added to ``refused``."""
    if not isinstance(values, dict):
        return values
    if isinstance(base, list) or (not isinstance(base, dict) and _index(next(iter(values), ""))):
        items = list(base) if isinstance(base, list) else []
        for key, value in values.items():
            if not _index(key):
                refused.append(f"{path}.{key}")
                continue
            index = int(key)
            items.extend({} for _ in range(index + 1 - len(items)))
            items[index] = _written_over(items[index], value, f"{path}.{key}", refused)
        return items
    table = dict(base) if isinstance(base, dict) else {}
    for key, value in values.items():
        table[key] = _written_over(table.get(key), value, f"{path}.{key}", refused)
    return table


def _index(key: str) -> bool:
    return key.isascii() and key.isdigit()
