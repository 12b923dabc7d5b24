"""The event is the one gate: what a journal line or a post holds is an event exactly, or refused."""
from __future__ import annotations

import json

import pytest

from labkit.core.errors import LabkitValueError
from labkit.progress.events import MAX_LINE_BYTES, Event, parse_event

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)


def test_an_event_survives_its_own_json():
    event = Event("ada", "check", "1.2", "not solved", "1.2/groups")
    assert parse_event(event.to_json()) == event
    preflight = Event("ada", "preflight", "preflight", "not ready", failed_probes=("torch", "widgets extension"))
    assert parse_event(preflight.to_json()) == preflight
    assert len(event.to_json()) < MAX_LINE_BYTES


def _record(**changes: object) -> str:
    record = json.loads(Event("ada", "check", "1.2", "not solved", "1.2/groups").to_json())
    return json.dumps({**record, **changes})


@pytest.mark.parametrize("changes", [
    {"learner": "<script>alert(1)</script>"}, {"learner": ""}, {"kind": "code"}, {"status": "solved!"},
    {"exercise": "1.2; drop table"}, {"mistake": "1.3/groups"}, {"mistake": "the hint's text, with spaces"},
    {"mistake": ""}, {"status": "solved"}, {"hint_level": 2}, {"failed_probes": ["torch"]}, {"id": "x" * 32},
    {"time": "yesterday"}, {"time": True}, {"code": "print(1)"},
])
def test_anything_but_an_event_is_refused(changes: dict[str, object]):
    with pytest.raises(LabkitValueError):
        parse_event(_record(**changes))


def test_a_missing_field_or_another_shape_is_refused():
    record = json.loads(_record())
    del record["mistake"]
    for text in (json.dumps(record), "[]", "not json", "{" * 10, "x" * (MAX_LINE_BYTES + 1)):
        with pytest.raises(LabkitValueError):
            parse_event(text)


def test_a_preflight_is_ready_exactly_when_no_probe_failed():
    with pytest.raises(LabkitValueError):
        Event("ada", "preflight", "preflight", "ready", failed_probes=("torch",))
    with pytest.raises(LabkitValueError):
        Event("ada", "preflight", "preflight", "not ready")


def test_a_hint_has_a_level_from_one_to_three():
    assert Event("ada", "hint", "1.2", "hint", hint_level=3).hint_level == 3
    for level in (0, 4):
        with pytest.raises(LabkitValueError):
            Event("ada", "hint", "1.2", "hint", hint_level=level)
