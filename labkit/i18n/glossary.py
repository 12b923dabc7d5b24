"""The versioned glossary (notebooks/i18n/glossary.csv): preferred terms and the variants a translation must not use.

Why: terms drift between translators ("双张量" for dual tensor, "тангенс" for a tangent vector); a term the glossary
forbids fails the check, with the reason and the preferred term, so the fix is obvious.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from labkit.core.errors import LabkitValueError

COLUMNS = ("term", "zh", "ru", "zh_forbidden", "ru_forbidden", "why")


@dataclass(frozen=True)
class Term:
    english: str
    preferred: dict[str, str]  # language -> preferred translation
    forbidden: dict[str, tuple[str, ...]]  # language -> variants that fail the check
    why: str


def load(path: Path) -> list[Term]:
    """Read the glossary; lines starting with ``#`` (its version line) are comments."""
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    except FileNotFoundError:
        raise LabkitValueError(f"No glossary at {path}; the translations need notebooks/i18n/glossary.csv.") from None
    reader = csv.DictReader(lines)
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise LabkitValueError(f"{path} lacks the column(s) {', '.join(missing)}; its header must name {', '.join(COLUMNS)}.")
    terms = []
    for row in reader:
        langs = [c[: -len("_forbidden")] for c in row if c and c.endswith("_forbidden")]
        terms.append(Term(
            english=row["term"],
            preferred={lang: row.get(lang) or "" for lang in langs},
            forbidden={lang: _variants(row[f"{lang}_forbidden"]) for lang in langs},
            why=row["why"] or "",
        ))
    return terms


def _variants(cell: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (cell or "").split(";") if v.strip())


def violations(terms: list[Term], lang: str, prose: str) -> list[str]:
    """Each forbidden variant found in ``prose`` (case-insensitive), with the preferred term and why."""
    text = prose.casefold()
    return [f"forbidden term {variant!r} for {term.english!r}: write {term.preferred.get(lang)!r} ({term.why})"
            for term in terms for variant in term.forbidden.get(lang, ()) if variant.casefold() in text]
