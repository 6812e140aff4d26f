"""``reconciler demo``: the problem and the fix, told with real runs on a fictional handbook.

It builds an embedded deployment (SQLite, Qdrant local mode, a markdown vault) in a folder,
ingests a company handbook the way people keep one — last year's expenses policy beside this
year's, an old deploy runbook, an archived datasheet, last year's salary bands, a long 2019
onboarding guide replaced by a one-line successor — then someone marks the replacements in
the vault. It measures retrieval (through the ingest embedder and ``default_filter``) before
reconciliation, runs ``plan`` and ``apply``, and measures again. Every number is measured.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import textwrap
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reconciler.app.deployment import ingest_sources, initialise
from reconciler.app.operations import engine_options, reconcile, report_data
from reconciler.app.wiring import open_qdrant_index
from reconciler.embedding import make_embedder
from reconciler.filters import default_filter
from reconciler.settings import Settings, load_settings

SOURCE = "handbook"


@dataclass(frozen=True)
class Note:
    """One handbook note: its file, its frontmatter and its body."""

    path: str
    front: Mapping[str, str]
    body: str


@dataclass(frozen=True)
class Question:
    """A question the handbook answers: the note that must be found, the one that must not."""

    text: str
    current: str
    stale: str | None


def _note(path: str, body: str, **front: str) -> Note:
    return Note(path, front, textwrap.dedent(body).strip() + "\n")


YEAR = datetime.now(UTC).year

NOTES: list[Note] = [
    _note(
        "policies/expenses-last-year.md",
        """
        # Travel expenses policy

        Meals when travelling: you can claim up to 40 EUR per day for meals when travelling,
        with receipts. Claims for meals and travel must be submitted within 60 days.
        """,
        id="expenses-last-year",
        family="expenses",
        version="1",
        status="current",
        effective_from=f"{YEAR - 1}-01-01",
        doc_class="internal",
        title=f"Travel expenses policy {YEAR - 1}",
    ),
    _note(
        "policies/expenses.md",
        """
        # Travel expenses policy

        Daily food allowance on business trips: 55 EUR, receipts required. File within 30 days.
        """,
        id="expenses",
        family="expenses",
        version="2",
        status="current",
        effective_from=f"{YEAR}-01-01",
        doc_class="internal",
        title=f"Travel expenses policy {YEAR}",
    ),
    _note(
        "engineering/deploy-runbook-old.md",
        """
        # Deploy runbook

        To roll back a deploy, ssh to the deploy host and run the rollback script to roll back
        the deploy to the previous release. Then announce the roll back in the release channel.
        """,
        id="deploy-runbook-old",
        family="deploy-runbook",
        version="1",
        status="current",
        effective_from="2023-03-01",
        doc_class="internal",
        title="Deploy runbook (2023)",
    ),
    _note(
        "engineering/deploy-runbook.md",
        """
        # Deploy runbook

        Reverting a release: press "Revert" on the pipeline page; it redeploys the last good
        image. Nobody needs shell access to production any more.
        """,
        id="deploy-runbook",
        family="deploy-runbook",
        version="2",
        status="current",
        effective_from=f"{YEAR}-02-01",
        doc_class="internal",
        title="Deploy runbook",
    ),
    _note(
        "people/onboarding-2019.md",
        """
        # Onboarding guide for a new hire

        Welcome! In the first week a new hire should: collect a laptop from IT on the first day,
        meet the team lead, read the engineering handbook, set up the VPN, shadow an on-call
        engineer, and book the first week introduction sessions. In the first week the new
        hire also completes the security training and the expenses training.

        ## First week checklist for a new hire

        - Day one: laptop, badge, accounts.
        - Day two: codebase tour with a buddy.
        - Day three to five: first small change shipped to production.
        """,
        id="onboarding-2019",
        family="onboarding",
        version="1",
        status="current",
        effective_from="2019-05-01",
        doc_class="internal",
        title="Onboarding guide (2019)",
    ),
    _note(
        "people/onboarding.md",
        """
        # Onboarding

        Onboarding lives in the HR portal now: follow your personalised checklist there.
        """,
        id="onboarding",
        family="onboarding",
        version="2",
        status="current",
        effective_from=f"{YEAR - 1}-09-01",
        doc_class="internal",
        title="Onboarding",
    ),
    _note(
        "people/salary-bands-last-year.md",
        """
        # Salary bands

        Senior engineer salary band: 70,000 to 85,000 EUR. Staff engineer salary band:
        85,000 to 100,000 EUR.
        """,
        id="salary-bands-last-year",
        family="salary-bands",
        version="1",
        status="current",
        effective_from=f"{YEAR - 1}-01-01",
        doc_class="restricted",
        title=f"Salary bands {YEAR - 1}",
    ),
    _note(
        "people/salary-bands.md",
        """
        # Compensation ranges

        Level 4 (senior): 76,000-92,000 EUR. Level 5 (staff): 92,000-110,000 EUR.
        """,
        id="salary-bands",
        family="salary-bands",
        version="2",
        status="current",
        effective_from=f"{YEAR}-01-01",
        doc_class="restricted",
        title=f"Salary bands {YEAR}",
    ),
    _note(
        "products/x100-datasheet.md",
        """
        # X100 sensor datasheet

        Battery life of the X100 sensor: 2 years. The sensor battery is not replaceable.
        """,
        id="x100-datasheet",
        status="current",
        effective_from="2020-01-01",
        doc_class="public",
        title="X100 datasheet",
    ),
    _note(
        "products/x200-datasheet.md",
        """
        # X200 datasheet

        Runs 5 years on one cell; the cell can be swapped in the field.
        """,
        id="x200-datasheet",
        status="current",
        effective_from=f"{YEAR - 1}-06-01",
        doc_class="public",
        title="X200 datasheet",
    ),
    _note(
        "company/holidays-last-year.md",
        """
        # Vacation days

        Employees get 25 vacation days per year. Vacation days do not carry over.
        """,
        id="holidays-last-year",
        family="holidays",
        version="1",
        status="current",
        effective_from=f"{YEAR - 1}-01-01",
        doc_class="public",
        title=f"Holidays {YEAR - 1}",
    ),
    _note(
        "company/holidays.md",
        """
        # Time off

        Everyone has 28 days of paid leave a year; up to 5 unused days carry over.
        """,
        id="holidays",
        family="holidays",
        version="2",
        status="current",
        effective_from=f"{YEAR}-01-01",
        doc_class="public",
        title=f"Holidays {YEAR}",
    ),
    _note(
        "company/office-hours.md",
        """
        # Office hours

        The office is open from 8:00 to 19:00 on weekdays.
        """,
        id="office-hours",
        status="current",
        effective_from="2022-01-01",
        doc_class="public",
        title="Office hours",
    ),
]

#: What a person does after ingestion: marks each replaced note in the vault.
REPLACEMENTS: dict[str, dict[str, str]] = {
    "policies/expenses-last-year.md": {"status": "superseded", "superseded_by": "expenses"},
    "engineering/deploy-runbook-old.md": {
        "status": "superseded",
        "superseded_by": "deploy-runbook",
    },
    "people/onboarding-2019.md": {"status": "superseded", "superseded_by": "onboarding"},
    "people/salary-bands-last-year.md": {"status": "superseded", "superseded_by": "salary-bands"},
    "company/holidays-last-year.md": {"status": "superseded", "superseded_by": "holidays"},
    "products/x100-datasheet.md": {"status": "retired"},
}

QUESTIONS: list[Question] = [
    Question("How much can I claim for meals when travelling?", "expenses", "expenses-last-year"),
    Question("How do I roll back a deploy?", "deploy-runbook", "deploy-runbook-old"),
    Question("What should a new hire do in the first week?", "onboarding", "onboarding-2019"),
    Question(
        "What is the salary band of a senior engineer?", "salary-bands", "salary-bands-last-year"
    ),
    Question("What is the battery life of the sensor?", "x200-datasheet", "x100-datasheet"),
    Question("How many vacation days do employees get per year?", "holidays", "holidays-last-year"),
    Question("When is the office open?", "office-hours", None),
]

CONFIG = """\
# Written by `reconciler demo`: the embedded default. Go on with check, plan, apply, status
# or serve, e.g.
#   {command} --config {path} check
[table]
url = "sqlite:///reconciler.db"

[index]
path = "qdrant"
collection = "handbook"

[[sources]]
name = "{source}"
type = "vault"
path = "vault"
trigger = "polling"
ttl = "24h"

[metrics]
listen = "127.0.0.1:9464"
"""


def _write(vault: Path, note: Note, extra: dict[str, str] | None = None) -> None:
    front = {**note.front, **(extra or {})}
    head = "---\n" + "".join(f"{k}: {v}\n" for k, v in front.items()) + "---\n"
    target = vault / note.path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(head + note.body, encoding="utf-8")


@dataclass
class Retrieval:
    """How retrieval answered the questions."""

    stale_first: int = 0
    stale_in_top5: int = 0
    current_found: int = 0
    questions: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)


def measure(settings: Settings, *, k: int = 5) -> Retrieval:
    """Ask every question through the ingest embedder and ``default_filter()``."""
    embedder = make_embedder(
        settings.ingest.embedder, dim=settings.ingest.dim, model=settings.ingest.model
    )
    index = open_qdrant_index(settings, needed_by="reconciler demo")
    result = Retrieval()
    try:
        for question in QUESTIONS:
            vector = embedder.embed([question.text])[0]
            hits = index.client.query_points(
                settings.index.collection,
                query=list(vector),
                query_filter=default_filter(keys=settings.index.key_map),
                limit=k * 4,
                with_payload=True,
            ).points
            docs: list[str] = []
            for hit in hits:  # best chunk per document, documents in rank order
                doc_id = settings.index.key_map.from_point(hit.payload).get("doc_id")
                if isinstance(doc_id, str) and doc_id not in docs:
                    docs.append(doc_id)
            top = docs[:k]
            stale = f"{SOURCE}:{question.stale}" if question.stale else None
            current = f"{SOURCE}:{question.current}"
            result.questions += 1
            result.stale_first += bool(top and stale and top[0] == stale)
            result.stale_in_top5 += bool(stale and stale in top)
            result.current_found += current in top
            result.rows.append(
                {"question": question.text, "first": top[0] if top else None, "top": top}
            )
    finally:
        index.close()
    return result


def shell_command() -> str:
    """This reconciler as a shell runs it, typed as printed: ``reconciler`` when that is what
    PATH finds, else the path of the console script that is running (or the one beside this
    interpreter, e.g. ``.venv/bin/reconciler`` of a venv that is not activated), else this
    interpreter with ``-m reconciler.cli``."""
    for candidate in (Path(sys.argv[0]), Path(sys.executable).with_name("reconciler")):
        if candidate.name != "reconciler" or not candidate.is_file():
            continue
        script = candidate.absolute()
        on_path = shutil.which("reconciler")
        if on_path is not None and Path(on_path).absolute() == script:
            return "reconciler"
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m reconciler.cli"


def run_demo(directory: Path, *, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Build the deployment in ``directory`` (empty or absent), tell the story, return numbers."""
    started = time.monotonic()
    if directory.exists() and any(directory.iterdir()):
        raise FileExistsError(
            f"{directory} is not empty; give `reconciler demo --dir` a new or empty folder"
        )
    vault = directory / "vault"
    vault.mkdir(parents=True)
    for note in NOTES:
        _write(vault, note)
    config = directory / "reconciler.toml"
    command = shell_command()
    config.write_text(
        CONFIG.format(command=command, path=shlex.quote(str(config)), source=SOURCE),
        encoding="utf-8",
    )
    settings = load_settings(config, environ={})

    say(f"1. A handbook of {len(NOTES)} notes in {vault}, kept the way people keep one:")
    say("   old versions beside their successors, nothing marked as replaced.")
    initialise(settings)
    ingested = ingest_sources(settings)
    say(
        f"   Ingested: {ingested['totals']['ingested']} documents, "
        f"{ingested['totals']['chunks_written']} chunks (SQLite + Qdrant local mode)."
    )

    for path, extra in REPLACEMENTS.items():
        note = next(n for n in NOTES if n.path == path)
        _write(vault, note, extra)
    say(
        f"2. Someone marks the {len(REPLACEMENTS)} replaced notes in the vault "
        "(superseded_by / retired). The index still says they are current."
    )

    before = measure(settings)
    say(
        f"3. Retrieval through default_filter() BEFORE reconciliation, {before.questions} "
        "questions:"
    )
    say(
        f"   stale version ranked first: {before.stale_first}; stale in the top 5: "
        f"{before.stale_in_top5}; current version found: {before.current_found}"
    )

    plan = reconcile(settings, engine_options(settings, mode="plan"))
    counts = plan.plan.counts()
    say(
        f"4. reconciler plan: {len(plan.findings)} findings -> {counts['table']} row update(s), "
        f"{counts['payload']} payload write(s) on {counts['points']} chunk(s); nothing embedded."
    )
    applied = reconcile(settings, engine_options(settings, mode="apply"))
    done = applied.writes()
    say(
        f"5. reconciler apply (run {applied.run_id}): {done['table']} row(s), "
        f"{done['points']} chunk payload(s) written; vectors and text untouched."
    )

    after = measure(settings)
    say("6. Retrieval through default_filter() AFTER:")
    say(
        f"   stale version cited: {after.stale_in_top5}; current version found: "
        f"{after.current_found} of {after.questions}"
    )
    check = reconcile(settings, engine_options(settings, mode="check"))
    data = report_data(applied)
    say("")
    say("   check     checked  findings (at apply)")
    for name, stats in data["summary"].items():
        say(f"   {name:9} {stats['checked']:7}  {stats['findings']:8}")
    say(
        f"\n   A second check finds {len(check.findings)} finding(s). Done in "
        f"{time.monotonic() - started:.1f}s."
    )
    say("   Go on with check, plan, apply, status or serve, e.g.:")
    say(f"   {command} --config {shlex.quote(str(config))} check")
    return {
        "config": str(config),
        "before": before.__dict__,
        "after": after.__dict__,
        "plan": counts,
        "applied": done,
        "summary": data["summary"],
        "findings_after": len(check.findings),
        "seconds": round(time.monotonic() - started, 2),
    }
