"""The settings check the table URL with SQLAlchemy's grammar without importing SQLAlchemy
(issue 38: start-up): ``url_backend`` must accept and refuse what ``make_url`` does, with the
same backend and the same error text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.engine import make_url

from reconciler.errors import ConfigError
from reconciler.settings import TableSettings, load_settings
from reconciler.settings.table import url_backend

#: Characters with a meaning in the grammar, and some that only look like they have one.
PIECES = "ab_+:/@?[]=&%.-1٣ \n\t#"


def sqlalchemy_says(url: str) -> str:
    try:
        return make_url(url).get_backend_name()
    except Exception as exc:
        return f"refused: {exc}"


def settings_say(url: str) -> str:
    try:
        return url_backend(url)
    except ValueError as exc:
        return f"refused: {exc}"


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///reconciler.db",
        "sqlite:////srv/r.db",
        "sqlite://",
        "sqlite:///:memory:?cache=shared",
        "postgresql+psycopg://u:p%40ss@db:5432/reconciler?sslmode=require",
        "postgresql+psycopg://u@[::1]:5432/r",
        "postgresql://db:/r",
        "postgresql://db:x/r",
        "postgresql://db: 12/r",
        "postgresql://db:1_0/r",
        "postgresql://db:-1/r",
        "mysql+pymysql://u@h/d",
        "a+b+c://",
        "+://",
        "reconciler.db",
        "sqlite:/relative.db",
        "",
        "://h",
        "sql-ite:///x",
        "sqlite:///x\ngarbage",
        "postgresql://u@h:5432\n:x",
        "postgresql://[::1/r",
        "postgresql://u:p:q@h/d",
    ],
)
def test_the_settings_read_a_url_as_sqlalchemy_does(url: str) -> None:
    assert settings_say(url) == sqlalchemy_says(url)


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.text(alphabet=PIECES, max_size=30),
        st.tuples(
            st.sampled_from(["sqlite", "postgresql+psycopg", "my_sql", "a+", "s q", ""]),
            st.text(alphabet=PIECES, max_size=25),
        ).map(lambda parts: f"{parts[0]}://{parts[1]}"),
    )
)
def test_the_settings_and_sqlalchemy_agree_on_any_url(url: str) -> None:
    assert settings_say(url) == sqlalchemy_says(url)


def test_a_refused_url_names_sqlalchemys_reason(tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "reconciler.toml"
    config.write_text('[table]\nurl = "postgresql://db:port/r"\n')

    with pytest.raises(ConfigError, match="invalid literal for int"):
        load_settings(config, environ={})
    with pytest.raises(ValueError, match="supported databases are"):
        TableSettings(url="mysql://h/d")
