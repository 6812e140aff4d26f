"""``[bootstrap]``: adopting an existing collection, and the payload layouts its ``preset``
names."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from reconciler.payload import LAYOUTS
from reconciler.settings.shared import Section

#: Payload layouts ``[bootstrap] preset`` names (``[index] layout``'s, "native" for "default"):
#: defaults for index.payload_prefix, index.text_key and the stored name of the document id
#: (``index.keys.doc_id``).
BOOTSTRAP_PRESETS: dict[str, dict[str, str]] = {
    "native": {},
    **{
        name: {"payload_prefix": each.prefix, "text_key": each.text_key, "doc_id": each.doc_id_key}
        for name, each in LAYOUTS.items()
        if name != "default"
    },
}


class BootstrapSettings(Section):
    """Adopting an existing collection (``reconciler bootstrap``)."""

    #: The collection's payload layout; sets defaults for the index keys (explicit ones win).
    preset: Literal["native", "langchain", "llamaindex"] = "native"
    #: The stored name (under index.payload_prefix) of the document id; default per preset.
    doc_id_key: str | None = Field(default=None, pattern=r"^[^.\s][^.]*$")
    #: A dotted payload path (from the payload's root) holding the family id; else the
    #: payload's doc_family_id; else one family per document.
    family_key: str | None = Field(default=None, pattern=r"^[^.\s]+(\.[^.\s]+)*$")
    #: The source name adopted rows are registered under (their source_key is the doc id).
    source: str = Field(default="adopted", pattern=r"^[A-Za-z0-9_.-]+$")
