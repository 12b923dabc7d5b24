"""The help queue under load, a part of ``make workshop-board-loadtest``: learners ask, an instructor claims and
closes, some cancel, hostile learners flood it; the queue must keep its order.

Why the order is checked and not only reported: "first asked, first in the list" is the queue's promise to a room,
so a list out of order under any load fails the run (exit status 1, one loud line), while how fast the instructor's
``api/queue`` answers is a figure (it depends on the machine). The load test knows, for each request, when its ask
was sent and when its reply came: when A's reply came before B's ask was sent, the board had A first, so every list
that shows both must show A above B. Asks that overlap in time may stand either way.
"""
from __future__ import annotations

import random
import statistics
import threading
import time
import urllib.error
from dataclasses import dataclass, field
from typing import Any

from labkit.workshop.load import request

ASK_EVERY_S = (20.0, 60.0)  # an honest learner asks again after this long (uniform)
CANCEL_SHARE = 0.3  # of her requests she cancels herself, after a while
CANCEL_AFTER_S = (5.0, 30.0)
LOOK_SHARE = 0.3  # of her requests with a look (she shares her server with the instructors)
WORK_S = 2.0  # the instructor closes a request this long after claiming it
POLL_S = 0.25


@dataclass
class QueueLog:
    """What the queue's clients saw, shared by their threads: each request's ask (sent, replied), counts, and the
    instructor's polls (their times, the order checked in each)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    asked: dict[str, tuple[float, float]] = field(default_factory=dict)  # request id -> (ask sent, reply came)
    hostile: set[str] = field(default_factory=set)  # the flooders' names
    counts: dict[str, int] = field(default_factory=dict)
    poll_ms: list[float] = field(default_factory=list)
    disorder: list[str] = field(default_factory=list)  # each list out of order, in words
    longest: int = 0
    hostile_most: int = 0  # the most open requests of the flooders one list showed
    honest_waits: list[float] = field(default_factory=list)  # seconds an honest learner's request waited for a claim

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def ask_seen(self, ident: str, sent: float, replied: float) -> None:
        with self.lock:
            self.asked.setdefault(ident, (sent, replied))

    def listed(self, rows: list[dict[str, Any]], took_ms: float) -> None:
        with self.lock:
            self.poll_ms.append(took_ms)
            self.longest = max(self.longest, len(rows))
            self.hostile_most = max(self.hostile_most, sum(row["learner"] in self.hostile for row in rows))
            self.disorder += out_of_order(rows, self.asked)


def out_of_order(rows: list[dict[str, Any]], asked: dict[str, tuple[float, float]]) -> list[str]:
    """Each way ``rows`` (the queue, as listed) breaks "first asked, first in the list", in words (none: in order).

    Two checks: the board's own ``opened`` times never go down the list, and no request stands above one whose ask
    was answered before its own ask was even sent (``asked``: id -> (sent, replied), as the clients saw them)."""
    found = []
    for above, below in zip(rows, rows[1:]):
        if below["opened"] < above["opened"]:
            found.append(f"{below['id']} (opened {below['opened']:.3f}) listed below {above['id']} "
                         f"(opened {above['opened']:.3f})")
    latest_sent, latest_id = float("-inf"), ""
    for row in rows:
        sent, replied = asked.get(row["id"], (None, None))
        if sent is None or replied is None:
            continue
        if latest_sent > replied:
            found.append(f"{latest_id} listed above {row['id']}, asked {latest_sent - replied:.3f} s after "
                         f"{row['id']} was answered")
        if sent > latest_sent:
            latest_sent, latest_id = sent, row["id"]
    return found


def _ask(base: str, token: str, body: dict[str, Any], log: QueueLog) -> dict[str, Any] | None:
    sent = time.monotonic()
    try:
        reply = request(base + "api/help", "POST", body, token)
    except urllib.error.HTTPError as exc:
        log.count(f"ask refused ({exc.code})")
        return None
    except OSError:
        log.count("ask failed")
        return None
    log.ask_seen(reply["request"]["id"], sent, time.monotonic())
    log.count("new request" if reply["new"] else "same request")
    return reply


def _cancel(base: str, token: str, exercise: str, log: QueueLog) -> None:
    try:
        request(base + "api/help/cancel", "POST", {"exercise": exercise}, token)
        log.count("cancelled")
    except urllib.error.HTTPError as exc:
        log.count("cancel found it closed" if exc.code == 404 else f"cancel refused ({exc.code})")
    except OSError:
        log.count("cancel failed")


def asker(base: str, name: str, token: str, exercises: tuple[str, ...], until: float, log: QueueLog) -> None:
    """An honest learner: every so often she asks about an exercise she failed; now and then she cancels."""
    draw = random.Random("help " + name)
    while _nap(draw.uniform(*ASK_EVERY_S), until):
        exercise = draw.choice(exercises)
        _ask(base, token, {"exercise": exercise, "mistake": f"{exercise}/other", "hint_level": draw.randint(0, 3),
                           "look": draw.random() < LOOK_SHARE}, log)
        if draw.random() < CANCEL_SHARE and _nap(draw.uniform(*CANCEL_AFTER_S), until):
            _cancel(base, token, exercise, log)


def _nap(seconds: float, until: float) -> bool:
    """Sleep ``seconds``, or until ``until`` if sooner; whether there is time left."""
    time.sleep(max(0.0, min(seconds, until - time.monotonic())))
    return time.monotonic() < until


def help_flood(base: str, name: str, token: str, until: float, log: QueueLog) -> None:
    """A hostile learner: asks on ever new exercises (with a look), as fast as the board answers, cancelling some."""
    draw = random.Random("flood " + name)
    while time.monotonic() < until:
        exercise = f"{draw.randint(0, 99)}.{draw.randint(0, 99)}"
        _ask(base, token, {"exercise": exercise, "look": True}, log)
        if draw.random() < 0.5:
            _cancel(base, token, exercise, log)


def instructor(base: str, token: str, until: float, log: QueueLog) -> None:
    """The instructor's page: polls the queue, claims the first unclaimed request, closes it ``WORK_S`` later."""
    mine: tuple[str, float] | None = None  # the request in her hands, and when she claimed it
    while time.monotonic() < until:
        started = time.monotonic()
        try:
            rows = request(base + "api/queue", token=token)["requests"]
        except OSError:
            log.count("queue poll failed")
            time.sleep(POLL_S)
            continue
        log.listed(rows, (time.monotonic() - started) * 1000)
        if mine and time.monotonic() - mine[1] >= WORK_S:
            _act(base, token, mine[0], "close", log)
            mine = None
        waiting = [row for row in rows if row["claimed"] is None]
        if mine is None and waiting:
            first = waiting[0]
            if _act(base, token, first["id"], "claim", log) and first["learner"] not in log.hostile:
                with log.lock:
                    log.honest_waits.append(float(first["waiting_s"]))
            mine = (first["id"], time.monotonic())
        time.sleep(POLL_S)


def _act(base: str, token: str, ident: str, action: str, log: QueueLog) -> bool:
    try:
        request(base + f"api/queue/{ident}/{action}", "POST", {}, token)
    except OSError:  # 404: ended meanwhile (cancelled, or past its look's limit)
        log.count(f"{action} found it ended")
        return False
    log.count(action + "ed" if action == "claim" else "closed by the instructor")
    return True


@dataclass(frozen=True)
class QueueFigures:
    """The help queue's part of the board's load report."""

    counts: dict[str, int]
    polls: int
    poll_ms_median: float
    poll_ms_p95: float
    poll_ms_max: float
    longest: int  # the most requests one list held
    hostile_most: int  # the most open requests of the flooders one list held
    honest_wait_s_median: float  # an honest learner's request, asking to claim
    disorder: tuple[str, ...]  # each list out of order (empty: the queue kept its order)

    @staticmethod
    def of(log: QueueLog) -> QueueFigures:
        ordered = sorted(log.poll_ms)
        p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else float("nan")
        return QueueFigures(dict(sorted(log.counts.items())), len(ordered),
                            statistics.median(ordered) if ordered else float("nan"), p95,
                            max(ordered, default=float("nan")), log.longest, log.hostile_most,
                            statistics.median(log.honest_waits) if log.honest_waits else float("nan"),
                            tuple(log.disorder))

    def to_text(self) -> str:
        verdict = ("in order: first asked, first in the list, in every list" if not self.disorder
                   else f"OUT OF ORDER in {len(self.disorder)} places, first: {self.disorder[0]}")
        return "\n".join([
            f"help queue: {', '.join(f'{what}: {count}' for what, count in self.counts.items())}",
            f"instructor's queue ({self.polls} polls): median {self.poll_ms_median:.0f} ms, p95 {self.poll_ms_p95:.0f} ms, "
            f"max {self.poll_ms_max:.0f} ms; longest list {self.longest}, the flooders' most {self.hostile_most}; "
            f"an honest request waited {self.honest_wait_s_median:.0f} s (median) for a claim",
            f"queue order: {verdict}",
        ])
