"""``[watch]``: ``serve``'s watch of its sources."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from pydantic import model_validator

from reconciler.errors import ConfigError
from reconciler.settings.shared import Duration, SecretVariable, Section


class WatchSettings(Section):
    """``serve``'s watch of its sources (vault, git: ``reconciler.app.watching``)."""

    #: How long the watch keeps the document table and the chunk index open after a run (a
    #: run that comes sooner reuses them: no reload of a local-mode collection or an Edge
    #: shard). Local mode and Edge lock their folder while open, so other processes
    #: (``reconciler status``, ``check``) cannot open the index that long after a change;
    #: 0 closes them after each run.
    keep_open: Duration = timedelta(0)
    #: ``POST /hooks/SOURCE`` on serve's HTTP port: a signed request (HMAC-SHA256 of the body
    #: with the secret, ``X-Hub-Signature-256: sha256=<hex>``) makes the watch look at that
    #: source now. Off by default; on, it needs the secret (an environment variable or a file).
    webhooks: bool = False
    webhook_secret_env: SecretVariable = None
    webhook_secret_file: str | None = None

    @model_validator(mode="after")
    def _bounded(self) -> WatchSettings:
        if self.keep_open < timedelta(0):
            raise ValueError("watch.keep_open must be 0s or longer")
        if self.webhook_secret_env and self.webhook_secret_file:
            raise ValueError("set at most one of watch.webhook_secret_env or webhook_secret_file")
        if self.webhooks and not (self.webhook_secret_env or self.webhook_secret_file):
            raise ValueError(
                "watch.webhooks needs a secret: set watch.webhook_secret_env (an environment "
                "variable's name) or watch.webhook_secret_file"
            )
        return self

    def webhook_secret(self) -> bytes:
        """The webhooks' HMAC secret, from the environment or a file; never logged."""
        where = (
            "watch.webhook_secret_env" if self.webhook_secret_env else "watch.webhook_secret_file"
        )
        try:
            if self.webhook_secret_env:
                value = os.environ.get(self.webhook_secret_env, "")
            else:
                value = Path(self.webhook_secret_file or "").read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                [(where, f"cannot read {self.webhook_secret_file}: {exc.strerror}")]
            ) from None
        if not value.strip():
            raise ConfigError([(where, "the webhook secret is empty or not set")])
        return value.strip().encode("utf-8")
