"""The board's version column: which version of the labs each learner's workspace holds.

Why a file and not an event: the version is what the push (:mod:`labkit.workshop.push`) and each spawn wrote into her
workspace, as the hub's account, in the board's folder of the hub's state (``push.json``); a learner can neither
write it nor claim another version. Read at each poll, a few hundred bytes.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from labkit.i18n.messages import _

RECORD = "push.json"


def read_record(path: Path) -> dict[str, Any]:
    """The room's push record: ``version`` (1 until the first push), ``note``, ``at``, ``learners`` (name -> version)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("learners"), dict):
        record = {"version": 1, "note": "", "at": None, "learners": {}}
    return record


def version_texts(path: Path, learners: list[str]) -> dict[str, str]:
    """Each of ``learners``' version cell, in words: hers, and the room's when she is behind."""
    record = read_record(path)
    latest = int(record["version"])
    texts = {}
    for learner in learners:
        held = record["learners"].get(learner)
        if held is None:
            texts[learner] = _("not recorded")
        elif int(held) < latest:
            texts[learner] = _("version {version} (the room's: {latest})").format(version=held, latest=latest)
        else:
            texts[learner] = _("version {version}").format(version=held)
    return texts


def learner_versions(path: Path) -> dict[str, str]:
    """Each recorded learner's version of the labs as plain text (the exports' column; "" for one not recorded)."""
    return {str(learner): str(held) for learner, held in read_record(path)["learners"].items()}
