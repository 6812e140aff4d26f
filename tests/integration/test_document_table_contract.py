"""The document table's contract (``reconciler.testing.table_contract``) on each adapter the
``table`` fixture yields (SQLite and PostgreSQL); a new document table adds itself there."""

from reconciler.testing.table_contract import (
    test_a_declaration_that_cannot_be_written_writes_nothing,
    test_audit_appends_extend_one_chain,
    test_declarations_are_recorded_revoked_and_restored_with_their_audit_entries,
    test_documents_by_id_family_and_stream,
    test_findings_are_kept_per_run,
    test_many_findings_are_kept_in_order_with_their_values,
    test_rows_requests_and_audit_commit_together,
    test_run_log_from_start_to_end,
    test_the_payload_derived_from_a_streamed_row_is_the_written_documents,
)

__all__ = [
    "test_a_declaration_that_cannot_be_written_writes_nothing",
    "test_audit_appends_extend_one_chain",
    "test_declarations_are_recorded_revoked_and_restored_with_their_audit_entries",
    "test_documents_by_id_family_and_stream",
    "test_findings_are_kept_per_run",
    "test_many_findings_are_kept_in_order_with_their_values",
    "test_rows_requests_and_audit_commit_together",
    "test_run_log_from_start_to_end",
    "test_the_payload_derived_from_a_streamed_row_is_the_written_documents",
]
