"""``python -m labkit progress``: your own table of the labs' exercises, solved or not, and what to do next.

Why a command and not only a notebook cell: a learner picking up the next day, in a terminal, wants to
know where they stopped. It shows :func:`labkit.progress.table.my_progress`: your journal, or on a
workshop hub the events the room's board holds for you.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from labkit.progress.table import my_progress


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--file", type=Path, default=None,
                        help="the progress file to read (default: your workspace's .labkit/progress.jsonl)")
    parser.add_argument("--local", action="store_true", help="on a hub: show your own file, do not ask the board")


def run(args: argparse.Namespace) -> int:
    print(my_progress(args.file, args.local).to_text())
    return 0
