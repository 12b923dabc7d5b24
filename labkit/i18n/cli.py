"""``python -m labkit i18n update|build|check``: the notebooks' and docs pages' translations (``make i18n-update`` ...).

Why a command: translators run ``update`` after an English change, ``build`` after translating, and
``make test`` runs ``check`` first, so a stale or unfinished translation stops the test run with the cells named.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.i18n import LANGS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("update", "build", "check"),
                        help="update: English notebooks -> catalogues; build: catalogues -> notebooks/<lang>/ (executed with "
                             "LABKIT_LANG=<lang>: labkit's verdicts in that language); "
                             "check: fail on anything missing, fuzzy, stale, off-glossary or structurally different")
    parser.add_argument("--lang", action="append", choices=LANGS,
                        help="one language (repeat for more); default: all")
    parser.add_argument("--notebooks-dir", type=Path, default=Path("notebooks"), help="the English notebooks' folder")
    parser.add_argument("--no-execute", action="store_true", help="build only: keep the English outputs, run nothing")
    parser.add_argument("--force", action="store_true",
                        help="build only: rebuild every notebook, also those built from today's English and catalogue "
                             "(after make notebooks changed the English outputs)")
    parser.add_argument("--timeout", type=int, default=600, help="build only: seconds per cell")


def docs_dir(notebooks_dir: Path) -> Path | None:
    """The docs site's Sphinx project beside the notebooks' folder (a checkout's ``docs/``); None for a folder of
    notebooks alone, whose check is the notebooks' only."""
    docs = notebooks_dir.resolve().parent / "docs"
    return docs if (docs / "conf.py").is_file() else None


def run(args: argparse.Namespace) -> int:
    try:  # polib, markdown-it-py and Babel come with the dev extra: --help works without them
        from labkit.i18n import docs_check, message_check, notebooks, sections
    except ImportError as exc:
        raise LabkitError(f"needs {exc.name}, which labkit's dev extra installs: pip install -e '.[dev]'.") from None
    langs = tuple(args.lang or LANGS)
    root = args.notebooks_dir
    if not notebooks.english_notebooks(root):
        raise LabkitValueError(f"{root} holds no English notebooks (0*.ipynb): run this in a checkout of labkit's "
                               "repository, or pass --notebooks-dir.")
    if args.action == "update":
        docs = docs_dir(root)
        changes = notebooks.update(root, langs) + (docs_check.update(langs, docs) if docs else [])
        print("\n".join(changes) if changes else "catalogues already match the English notebooks and docs pages")
        return 0
    if args.action == "build":
        failed = 0
        for line in notebooks.build(root, langs, execute=not args.no_execute, timeout=args.timeout,
                                     force=args.force):
            failed += line.startswith("skipped")
            print(line, flush=True)
        print(sections.write(root), flush=True)  # the headings the hints name, from the same catalogues
        return 1 if failed else 0
    docs = docs_dir(root)
    problems = [*map(str, notebooks.check(root, langs)),
                *sections.problems(root),
                *message_check.problems(langs, message_check.LOCALE_DIR, glossary_path=root / "i18n" / "glossary.csv"),
                *(docs_check.problems(langs, docs, glossary_path=root / "i18n" / "glossary.csv") if docs else [])]
    for problem in problems:
        print(problem, file=sys.stderr)
    count = len(notebooks.english_notebooks(root))
    if problems:
        print(f"i18n check: {len(problems)} problem(s) in {', '.join(langs)}", file=sys.stderr)
        return 1
    pages = ", the docs pages" if docs else ""
    print(f"i18n check: {count} notebooks{pages} and labkit's messages in {', '.join(langs)}, every translation finished "
          "and current")
    return 0
