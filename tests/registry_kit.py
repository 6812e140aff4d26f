"""A document registry served over HTTP as docs/connectors/http-registry.md describes it, with
scripted failures: the HTTP connector's tests and the end-to-end run of three connectors."""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from acceptance_kit import body
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

Scripted = Response | Callable[[], Response]


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class FakeRegistry:
    """A document registry as the schema describes it, with scripted failures.

    ``script["page:2"]`` holds responses served, in order, instead of the second listing page
    (then the page is served normally); ``broken["body:ID"]`` is served every time.
    """

    def __init__(
        self, *, with_hashes: bool = False, token: str | None = None, etags: bool = False
    ) -> None:
        #: ``etags``: the listing carries an ``ETag`` of the whole registry, and a request
        #: whose ``If-None-Match`` holds it is answered 304 (a conditional poll).
        self.etags = etags
        self.records: dict[str, dict[str, Any]] = {}
        self.bodies: dict[str, str] = {}
        self.with_hashes = with_hashes
        self.token = token
        self.script: dict[str, list[Scripted]] = defaultdict(list)
        self.broken: dict[str, Scripted] = {}
        self.hits: list[str] = []
        self.auth_seen: list[str | None] = []
        #: The listing's ``Last-Modified`` (an HTTP date), when set.
        self.modified: str | None = None

    def add(self, doc_id: str, text: str | None = None, **fields: Any) -> None:
        self.records[doc_id] = {"id": doc_id, **fields}
        self.bodies[doc_id] = text if text is not None else body(doc_id, f"About {doc_id}.")

    def update(self, doc_id: str, **fields: Any) -> None:
        self.records[doc_id].update(fields)

    def serve(self, server: HTTPServer) -> str:
        server.expect_request(re.compile(r"^/reg/.*")).respond_with_handler(self.handle)
        return server.url_for("/reg")

    def handle(self, request: Request) -> Response:
        self.auth_seen.append(request.headers.get("Authorization"))
        if self.token is not None and request.headers.get("Authorization") != (
            f"Bearer {self.token}"
        ):
            return Response("no", status=401)
        if request.path == "/reg/documents":
            limit = int(request.args.get("limit", "100"))
            offset = int(request.args.get("cursor", "c0")[1:])
            if self.etags and request.headers.get("If-None-Match") == self.etag():
                self.hits.append("not modified")
                return Response(status=304, headers={"ETag": self.etag()})
            return self._serve(f"page:{offset // limit + 1}", lambda: self._page(offset, limit))
        match = re.fullmatch(r"/reg/documents/(.+)/body", request.path)
        if match is not None:
            doc_id = match.group(1)
            return self._serve(f"body:{doc_id}", lambda: self._body(doc_id))
        return Response("not found", status=404)

    def _serve(self, what: str, normal: Callable[[], Response]) -> Response:
        self.hits.append(what)
        scripted = self.broken.get(what) or (
            self.script[what].pop(0) if self.script[what] else None
        )
        if scripted is None:
            return normal()
        return scripted if isinstance(scripted, Response) else scripted()

    def _page(self, offset: int, limit: int) -> Response:
        ids = sorted(self.records)
        entries = []
        for doc_id in ids[offset : offset + limit]:
            entry = dict(self.records[doc_id])
            if self.with_hashes and doc_id in self.bodies:
                entry["content_hash"] = sha(self.bodies[doc_id])
            entries.append(entry)
        following = f"c{offset + limit}" if offset + limit < len(ids) else None
        return Response(
            json.dumps({"documents": entries, "next_cursor": following}),
            content_type="application/json",
            headers={
                **({"ETag": self.etag()} if self.etags else {}),
                **({"Last-Modified": self.modified} if self.modified else {}),
            },
        )

    def etag(self) -> str:
        """The registry's version: a hash of every record and body."""
        state = json.dumps([self.records, self.bodies], sort_keys=True)
        return '"' + hashlib.sha256(state.encode("utf-8")).hexdigest()[:16] + '"'

    def _body(self, doc_id: str) -> Response:
        if doc_id not in self.bodies:
            return Response(json.dumps({"error": "not found"}), status=404)
        return Response(self.bodies[doc_id], content_type="text/markdown; charset=utf-8")
