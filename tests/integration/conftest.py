"""Real stores for the integration tests (``stores_kit``): they import the drivers."""

from __future__ import annotations

from stores_kit import deploy, pg_admin_url, pg_server, pg_url, table, table_url

__all__ = ["deploy", "pg_admin_url", "pg_server", "pg_url", "table", "table_url"]
