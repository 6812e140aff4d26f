"""Configuration: TOML + RECONCILER_* overrides, relative paths, secrets, all-at-once errors."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from importlib.metadata import entry_points
from pathlib import Path

import hypothesis
import hypothesis_kit
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.app.operations import engine_options
from reconciler.errors import ConfigError
from reconciler.model import RunMode
from reconciler.pipeline.values import Guard, Options
from reconciler.scheduling import cron_trigger
from reconciler.settings import (
    ENV_PREFIX,
    ENV_RESERVED,
    ScheduleSettings,
    load_settings,
    parse_duration,
)
from reconciler.sources import BUILTIN, ENTRY_POINT_GROUP, describe

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "reconciler" / "settings" / "reconciler.example.toml"
)


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "conf" / "reconciler.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


def test_the_annotated_example_is_valid() -> None:
    settings = load_settings(EXAMPLE, environ={})
    assert settings.table.url == f"sqlite:///{EXAMPLE.parent / 'reconciler.db'}"
    assert settings.index.path == str(EXAMPLE.parent / "qdrant")
    assert [s.name for s in settings.sources] == ["handbook"]
    assert settings.sources[0].ttl == timedelta(hours=24)
    assert settings.guard.max_changed_fraction == 0.2
    assert settings.policy.missing_in_source_grace == timedelta(days=7)


def test_three_mistakes_give_one_error_naming_all_three(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[index]
path = "qdrant"
colection = "typo"
[guard]
max_changed_fraction = "lots"
[[sources]]
name = "handbook"
type = "wiki"
path = "vault"
""",
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    problems = dict(caught.value.problems)
    assert set(problems) == {"index.colection", "guard.max_changed_fraction", "sources[0].type"}
    assert problems["sources[0].type"].startswith("no connector 'wiki' is installed")
    assert problems["index.colection"] == "unknown key; did you mean 'collection'?"
    message = str(caught.value)
    assert "3 problem(s)" in message
    for key in problems:
        assert key in message


def test_environment_overrides_nested_keys_and_list_items(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[[sources]]
name = "handbook"
type = "vault"
path = "vault"
""",
    )
    settings = load_settings(
        path,
        environ={
            "RECONCILER_TABLE__URL": "postgresql+psycopg://u@db/reconciler",
            "RECONCILER_GUARD__MAX_CHANGED_FRACTION": "0.05",
            "RECONCILER_SOURCES__0__TTL": "6h",
            "RECONCILER_INDEX__KEYS__VERSION_STATE": "status",
            "RECONCILER_CONFIG": "ignored-here",
        },
    )
    assert settings.table.url == "postgresql+psycopg://u@db/reconciler"
    assert settings.guard.max_changed_fraction == 0.05
    assert settings.sources[0].ttl == timedelta(hours=6)
    assert settings.index.key_map.path("version_state") == "status"


def test_unknown_environment_key_is_reported_with_its_variable(tmp_path: Path) -> None:
    path = write(tmp_path, "")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={"RECONCILER_TABEL__URL": "x"})
    assert caught.value.problems == [
        ("tabel", "unknown key; did you mean 'table'? (from RECONCILER_TABEL__URL)")
    ]


def test_variable_values_are_text_and_a_list_item_is_written_over_the_files(
    tmp_path: Path,
) -> None:
    """pydantic-settings reads the variables (issue 35), as the loader did by hand before: a
    value is its text, never JSON ("3", "null"); an index names an item of the file's list,
    which keeps its other items and keys; the prefix is upper case."""
    path = write(
        tmp_path,
        '[[sources]]\nname = "a"\ntype = "vault"\npath = "v"\n'
        '[[sources]]\nname = "b"\ntype = "git"\nurl = "https://x/y.git"\n'
        'options = { branch = "main", subdir = "docs" }\n',
    )
    settings = load_settings(
        path,
        environ={
            "RECONCILER_SOURCES__1__NAME": "3",
            "RECONCILER_SOURCES__1__OPTIONS__SUBDIR": "null",
            "RECONCILER_INDEX__KEYS__DOC_ID": "true",
            "reconciler_table__url": "not read: the prefix is RECONCILER_",
        },
    )
    assert [(s.name, s.type) for s in settings.sources] == [("a", "vault"), ("3", "git")]
    assert settings.sources[1].options == {"branch": "main", "subdir": "null"}
    assert settings.index.keys == {"doc_id": "true"}
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={"RECONCILER_SOURCES__3__TTL": "1h"})
    assert ("sources[2].name", "Field required") in caught.value.problems
    assert ("sources[3].type", "Field required") in caught.value.problems


@pytest.mark.parametrize(
    ("environ", "problem"),
    [
        # Before issue 35 the section's variable was dropped when a key's variable followed it,
        # and with it the keys set before it (this loaded, BATCH_SIZE and "128" unread);
        # pydantic-settings reads a section's variable as the whole section: refused, named.
        (
            {
                "RECONCILER_table": "128",
                "RECONCILER_table__url_env": "DB_URL",
                "RECONCILER_TABLE__BATCH_SIZE": "git",
            },
            (
                "table",
                "Input should be a valid dictionary or instance of TableSettings "
                "(from RECONCILER_table)",
            ),
        ),
        (
            {"RECONCILER_INDEX__KEYS": "status", "RECONCILER_INDEX__KEYS__VERSION_STATE": "s"},
            ("index.keys", "Input should be a valid dictionary (from RECONCILER_INDEX__KEYS)"),
        ),
        # Before, -1 counted from the end (the last source's ttl, its variable unnamed).
        (
            {"RECONCILER_SOURCES__-1__TTL": "6h"},
            ("RECONCILER_SOURCES__-1__TTL", "does not name a configuration key"),
        ),
        (
            {"RECONCILER_SOURCES__X__TTL": "6h"},
            ("RECONCILER_SOURCES__X__TTL", "does not name a configuration key"),
        ),
        # pydantic-settings keeps the text and drops the key under it; before, the key's table
        # replaced the text ("Input should be a valid string"): refused either way.
        (
            {"RECONCILER_METRICS__TEXTFILE": "m.prom", "RECONCILER_METRICS__TEXTFILE__X": "y"},
            (
                "RECONCILER_METRICS__TEXTFILE__X",
                "names a key inside metrics.textfile, which RECONCILER_METRICS__TEXTFILE sets; "
                "set one of them",
            ),
        ),
        (
            {"RECONCILER_TABEL__URL": "x", "RECONCILER_TABEL": "y"},
            ("tabel", "unknown key; did you mean 'table'? (from RECONCILER_TABEL)"),
        ),
    ],
)
def test_variables_that_name_no_key_are_refused_by_name(
    tmp_path: Path, environ: dict[str, str], problem: tuple[str, str]
) -> None:
    """The counterexamples of the loader by hand against pydantic-settings' reading (issue
    35): where they differ, what was decided (docs/configuration.md)."""
    path = write(tmp_path, '[[sources]]\nname = "a"\ntype = "vault"\npath = "v"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ=environ)
    assert caught.value.problems == [problem]


def test_pydantic_settings_is_loaded_by_the_variables_alone() -> None:
    """Importing the settings and loading a file without variables load no pydantic-settings
    (20-60 ms of CPU, issue 35): a command pays for it when an override is set."""
    code = (
        "import sys; from reconciler.settings import load_settings; "
        "load_settings(None, environ={'RECONCILER_TEST_PG': 'reserved'}); "
        "a = 'pydantic_settings' in sys.modules; "
        "load_settings(None, environ={'RECONCILER_GUARD__FLOOR': '3'}); "
        "print(a, 'pydantic_settings' in sys.modules)"
    )
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            cwd=folder,
        )
    assert done.stdout.split() == ["False", "True"]


def test_relative_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[table]
url = "sqlite:///data/r.db"
[index]
path = "qdrant"
[[sources]]
name = "a"
type = "vault"
path = "../vault"
[metrics]
textfile = "metrics.prom"
""",
    )
    settings = load_settings(path, environ={})
    base = path.parent
    assert settings.table.url == f"sqlite:///{base / 'data' / 'r.db'}"
    assert settings.index.path == str(base / "qdrant")
    assert settings.sources[0].path == str(tmp_path / "vault")
    assert settings.metrics.textfile == str(base / "metrics.prom")
    absolute = write(tmp_path, '[table]\nurl = "sqlite:////srv/r.db"\n')
    assert load_settings(absolute, environ={}).table.url == "sqlite:////srv/r.db"


def test_secrets_come_only_from_environment_or_file(tmp_path: Path) -> None:
    literal = write(tmp_path, '[index]\nurl = "http://q:6333"\napi_key = "s3cret"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(literal, environ={})
    assert "never read from the config file" in str(caught.value)
    assert "s3cret" not in str(caught.value)

    from_env = write(tmp_path, '[index]\nurl = "http://q:6333"\napi_key_env = "QKEY"\n')
    settings = load_settings(from_env, environ={})
    with pytest.raises(ConfigError, match="QKEY is not set"):
        settings.index.api_key()
    (tmp_path / "conf" / "key").write_text("from-file\n")
    from_file = write(tmp_path, '[index]\nurl = "http://q:6333"\napi_key_file = "key"\n')
    assert load_settings(from_file, environ={}).index.api_key() == "from-file"


def test_password_in_table_url_is_masked_for_display(tmp_path: Path) -> None:
    path = write(tmp_path, '[table]\nurl = "postgresql+psycopg://u:hunter2@db/r"\n')
    settings = load_settings(path, environ={})
    assert "hunter2" not in settings.table.display_url()
    assert settings.table.resolved_url().endswith("u:hunter2@db/r")


def test_cross_field_rules(tmp_path: Path) -> None:
    both = write(tmp_path, '[index]\npath = "q"\nurl = "http://q:6333"\n')
    with pytest.raises(ConfigError, match=r"exactly one of index\.path"):
        load_settings(both, environ={})
    # An empty override unsets the embedded path: the server is used (a config error, not a
    # traceback, when neither is left).
    local = write(tmp_path, '[index]\npath = "q"\n')
    server = load_settings(
        local, environ={"RECONCILER_INDEX__PATH": "", "RECONCILER_INDEX__URL": "http://q:6333"}
    )
    assert (server.index.path, server.index.url) == (None, "http://q:6333")
    with pytest.raises(ConfigError, match=r"exactly one of index\.path"):
        load_settings(local, environ={"RECONCILER_INDEX__PATH": " "})
    dupes = write(
        tmp_path,
        '[[sources]]\nname = "a"\ntype = "vault"\npath = "v"\n'
        '[[sources]]\nname = "a"\ntype = "vault"\npath = "w"\n',
    )
    with pytest.raises(ConfigError, match="repeated: a"):
        load_settings(dupes, environ={})
    webhook_ttl = write(
        tmp_path,
        '[[sources]]\nname = "a"\ntype = "vault"\npath = "v"\ntrigger = "webhook"\nttl = "1h"\n',
    )
    with pytest.raises(ConfigError, match="polling sources only"):
        load_settings(webhook_ttl, environ={})


def test_the_edge_engine_rules(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path, "[index]\n"), environ={}).index.engine == "qdrant"
    edge = load_settings(write(tmp_path, '[index]\nengine = "edge"\npath = "shards"\n'), environ={})
    assert (edge.index.engine, edge.index.path) == ("edge", str(tmp_path / "conf" / "shards"))
    with_url = write(tmp_path, '[index]\nengine = "edge"\npath = "s"\nurl = "http://q:6333"\n')
    with pytest.raises(ConfigError, match=r"remove index\.url") as caught:
        load_settings(with_url, environ={})
    assert "index: " in str(caught.value)
    # no embedded default for Edge: its folder is named
    with pytest.raises(ConfigError, match=r'engine = "edge" needs index\.path'):
        load_settings(write(tmp_path, '[index]\nengine = "edge"\n'), environ={})
    keyed = write(tmp_path, '[index]\nengine = "edge"\npath = "s"\napi_key_env = "QDRANT_KEY"\n')
    with pytest.raises(ConfigError, match="takes no API key"):
        load_settings(keyed, environ={})
    with pytest.raises(ConfigError, match=r"index\.engine: Input should be 'qdrant' or 'edge'"):
        load_settings(write(tmp_path, '[index]\nengine = "chroma"\n'), environ={})
    # listed with the other problems, and switchable from the environment
    mixed = write(tmp_path, '[index]\nengine = "edge"\n[guard]\nfloor = -1\n')
    with pytest.raises(ConfigError, match=r"2 problem\(s\)"):
        load_settings(mixed, environ={})
    local = write(tmp_path, '[index]\npath = "q"\n')
    assert load_settings(local, environ={"RECONCILER_INDEX__ENGINE": "edge"}).index.engine == "edge"


def test_missing_file_and_bad_toml_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml", environ={})
    bad = write(tmp_path, "[table\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(bad, environ={})


def test_defaults_without_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings(None, environ={})
    assert settings.origin == "defaults"
    assert settings.index.path == str(tmp_path / "qdrant")
    assert settings.table.url == f"sqlite:///{tmp_path / 'reconciler.db'}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("15m", timedelta(minutes=15)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        (30, timedelta(seconds=30)),
    ],
)
def test_durations(text: object, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("bad", ["", "7", "1y", "-1h", True])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(bad)


def test_secret_variables_must_not_look_like_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, '[table]\nurl_env = "RECONCILER_DB_URL"\n')
    with pytest.raises(ConfigError, match="read as config overrides"):
        load_settings(path, environ={})


def test_the_default_schedules_never_fire_in_the_same_minute() -> None:
    """Issue 24: the old defaults fired all three jobs at 02:00, where two lost the lease."""
    defaults = ScheduleSettings()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    fired: dict[datetime, str] = {}
    for job in ("full", "ttl", "dates"):
        for when in _fire_times(getattr(defaults, job), start, 24 * 60 // 5 * 8):
            if when >= start.replace(day=9):
                break
            assert when not in fired, (job, fired[when], when)
            fired[when] = job
    assert set(fired.values()) == {"full", "ttl", "dates"}


def _fire_times(expression: str, start: datetime, count: int) -> list[datetime]:
    """The next ``count`` instants a cron expression fires after ``start``."""
    trigger = cron_trigger(expression)
    times: list[datetime] = []
    previous = None
    for _ in range(count):
        fire = trigger.get_next_fire_time(previous, previous or start)
        if fire is None:
            break
        times.append(fire)
        previous = fire
    return times


def test_the_built_in_connectors_are_listed_once_and_each_loads() -> None:
    """``reconciler.sources.BUILTIN`` is the one list of them: the distribution declares no entry
    point of its own (pyproject.toml listed them a second time), and each loads from its address."""
    ours = [
        ep.name
        for ep in entry_points(group=ENTRY_POINT_GROUP)
        if ep.dist is not None and ep.dist.name.replace("_", "-").lower() == "corpus-reconciler"
    ]
    assert ours == []
    listed = {row["type"]: (row["target"], row["status"]) for row in describe()}
    assert {kind: listed.get(kind) for kind in BUILTIN} == {
        kind: (target, "ok") for kind, target in BUILTIN.items()
    }
    assert set(BUILTIN) == {"vault", "git", "confluence", "http", "sql"}


def test_the_job_deadline_and_stop_grace_are_checked_at_load(tmp_path: Path) -> None:
    defaults = load_settings(write(tmp_path, ""), environ={}).schedule
    assert defaults.job_deadline == timedelta(hours=1)
    assert defaults.stop_grace == timedelta(minutes=5)
    assert defaults.job_deadline <= defaults.full_grace
    given = load_settings(
        write(tmp_path, '[schedule]\njob_deadline = "20m"\nstop_grace = "30s"\n'), environ={}
    ).schedule
    assert (given.job_deadline, given.stop_grace) == (timedelta(minutes=20), timedelta(seconds=30))
    longer = write(tmp_path, '[schedule]\njob_deadline = "7h"\n')
    with pytest.raises(ConfigError, match=r"job_deadline .* is longer than schedule\.full_grace"):
        load_settings(longer, environ={})
    with pytest.raises(ConfigError, match=r"stop_grace must be longer than 0s"):
        load_settings(write(tmp_path, "[schedule]\nstop_grace = 0\n"), environ={})
    with pytest.raises(ConfigError, match="expected a duration"):
        load_settings(write(tmp_path, '[schedule]\njob_deadline = "soon"\n'), environ={})


def test_the_store_bounds_derive_from_the_job_deadline(tmp_path: Path) -> None:
    """Issue 36: every store call is bounded; unset, the bounds follow ``job_deadline``."""
    defaults = load_settings(write(tmp_path, ""), environ={}).store_bounds
    assert (defaults.connect, defaults.statement, defaults.lock) == (30.0, 3600.0, 60.0)
    assert defaults.index == 30.0  # index.timeout, the smaller
    short = load_settings(
        write(tmp_path, '[schedule]\njob_deadline = "6s"\nstop_grace = "4s"\n'), environ={}
    ).store_bounds
    assert (short.connect, short.statement, short.lock, short.index) == (2.0, 6.0, 3.0, 3.0)
    given = load_settings(
        write(
            tmp_path,
            '[table]\nconnect_timeout = "5s"\nstatement_timeout = "2m"\nlock_timeout = "10s"\n',
        ),
        environ={},
    ).store_bounds
    assert (given.connect, given.statement, given.lock) == (5.0, 120.0, 10.0)


def test_the_default_configuration_maps_onto_the_default_options(tmp_path: Path) -> None:
    """One set of defaults (``reconciler.model.defaults``): a run built from an empty configuration
    is the run ``Options()`` describes, guard, policies and batches alike."""
    settings = load_settings(write(tmp_path, ""), environ={})
    assert engine_options(settings, mode="check") == Options()
    assert engine_options(settings, mode="check").guard == Guard()
    chosen = load_settings(
        write(tmp_path, '[guard]\nfloor = 3\n[policy]\nmissing_in_source_grace = "2d"\n'),
        environ={"RECONCILER_INDEX__WRITE_BATCH": "7"},
    )
    options = engine_options(chosen, mode="apply", actor="test")
    assert (options.guard.floor, options.missing_grace, options.write_batch) == (
        3,
        timedelta(days=2),
        7,
    )
    assert options == replace(
        Options(mode=RunMode.APPLY, actor="test"),
        guard=Guard(floor=3),
        missing_grace=timedelta(days=2),
        write_batch=7,
    )


#: Keys a variable may set: (TOML table, key, a value the file sets, the value a variable sets,
#: that value as TOML writes it).
OVERRIDABLE = (
    ("guard", "floor", "5", "3", "3"),
    ("guard", "max_changed_fraction", "0.3", "0.05", "0.05"),
    ("table", "batch_size", "100", "17", "17"),
    ("index", "write_batch", "50", "9", "9"),
    ("index", "collection", '"main"', "other", '"other"'),
    ("index.keys", "version_state", '"state"', "status", '"status"'),
    ("policy", "missing_in_source_grace", '"1d"', "2d", '"2d"'),
    ("policy", "unknown_siblings", '"supersede"', "report", '"report"'),
    ("schedule", "full", '"0 1 * * *"', "0 3 * * *", '"0 3 * * *"'),
    ("metrics", "listen", '"127.0.0.1:1"', "0.0.0.0:9000", '"0.0.0.0:9000"'),
    ("ingest", "dim", "64", "128", "128"),
    ("sources", "ttl", '"24h"', "6h", '"6h"'),
)


def _toml(values: dict[tuple[str, str], str]) -> str:
    """A configuration setting ``values`` ((table, key) -> TOML value), with one source."""
    tables: dict[str, list[str]] = {}
    for (table, key), value in values.items():
        tables.setdefault(table, []).append(f"{key} = {value}")
    source = ['name = "handbook"', 'type = "vault"', 'path = "vault"', *tables.pop("sources", [])]
    body = [f"[{table}]\n" + "\n".join(lines) for table, lines in tables.items()]
    return "\n".join([*body, "[[sources]]", *source]) + "\n"


@hypothesis.settings(max_examples=hypothesis_kit.examples(20))
@given(
    st.sets(st.sampled_from(range(len(OVERRIDABLE)))),
    st.sets(st.sampled_from(range(len(OVERRIDABLE)))),
    st.booleans(),
    st.sampled_from(sorted(ENV_RESERVED)),
)
def test_a_variable_sets_its_key_over_the_file(
    in_file: set[int], in_env: set[int], lower: bool, reserved: str
) -> None:
    """Whatever the file sets, ``RECONCILER_<TABLE>__<KEY>`` (a list item by its index, the
    key in either case) gives the key the variable's value, and the reserved variables
    set nothing: the configuration is the file with the variables' values written in.

    Unchanged since pydantic-settings reads the variables (issue 35); where its reading and the
    loader's by hand differed outside these keys, what was decided is held by the examples of
    ``test_variables_that_name_no_key_are_refused_by_name``."""
    environ = {reserved: "not a key"}
    written: dict[tuple[str, str], str] = {}
    expected: dict[tuple[str, str], str] = {}
    for n in sorted(in_file | in_env):
        table, key, file_value, env_value, env_as_toml = OVERRIDABLE[n]
        if n in in_file:
            written[table, key] = expected[table, key] = file_value
        if n in in_env:
            section = "SOURCES__0" if table == "sources" else table.upper().replace(".", "__")
            environ[f"{ENV_PREFIX}{section}__{key.lower() if lower else key.upper()}"] = env_value
            expected[table, key] = env_as_toml
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        (base / "given.toml").write_text(_toml(written), encoding="utf-8")
        (base / "expected.toml").write_text(_toml(expected), encoding="utf-8")
        found = load_settings(base / "given.toml", environ=environ)
        wanted = load_settings(base / "expected.toml", environ={})
    assert found.model_dump() == wanted.model_dump()
