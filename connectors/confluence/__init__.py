"""The system of record for Confluence: Cloud (REST v2) and Data Center / Server (REST v1), one
page a document (docs/connectors/confluence.md).

``ConfluenceSource`` (``source.py``) reads a site through its parts: ``client`` speaks the REST
API (authentication, paging, the HTTP policy), ``pages`` lists the pages in scope,
``declaration`` reads what each page declares (status, labels, content properties),
``supersession`` resolves successors across the scan, and ``options`` declares the
``[[sources]]`` entry.
"""

from connectors.confluence.options import (
    DEFAULT_STATUSES,
    FLAVORS,
    STATUS_STATES,
    ConfluenceOptions,
    ConfluenceSettings,
)
from connectors.confluence.source import ConfluenceSource

__all__ = [
    "DEFAULT_STATUSES",
    "FLAVORS",
    "STATUS_STATES",
    "ConfluenceOptions",
    "ConfluenceSettings",
    "ConfluenceSource",
]
