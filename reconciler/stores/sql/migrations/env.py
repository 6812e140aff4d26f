"""Alembic environment: runs on the connection the reconciler hands over (never a CLI URL)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

from reconciler.stores.sql.schema import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    """Run migrations on ``config.attributes['connection']`` or on ``sqlalchemy.url``."""
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = engine_from_config(
        config.get_section(config.config_ini_section) or {},
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run `reconciler init`")
run_migrations_online()
