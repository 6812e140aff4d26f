"""The identity map's old address, kept so that code written against it still imports: which
family a source document belongs to is decided in ``reconciler.rules.identity``."""

from reconciler.rules.identity import FamilyAssignment, resolve_families

__all__ = ["FamilyAssignment", "resolve_families"]
