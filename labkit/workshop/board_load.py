"""The room board under load: ``make workshop-board-loadtest``: how far behind the instructor's board is, and its cost.

Why a benchmark and not a test: how fast the board follows depends on the machine and its load, so it is
a figure to report (workshop/README.md), never an assertion in ``make test``.

It starts the workshop hub on free loopback ports (:func:`labkit.workshop.load.workshop_hub`; no learner
server is started: the board only needs hub accounts and their tokens), makes ``learners`` hub users,
each with a token of their own, and has each post one event every ``interval`` seconds (with a random
offset, so they do not post in step) for ``seconds`` seconds, exactly as a kernel's sender does. The
instructor's view polls ``api/grid`` every ``POLL_S`` seconds with the instructor's token. An event's
*latency* runs from the start of its post to the first grid that shows it (the learner's last activity
reaching the event's time); the page itself polls every ``board.app.POLL_MS``, which adds at most that
much to what the instructor sees. It also samples the board process's CPU seconds and peak RSS.

``hostile`` more learners flood meanwhile: each posts full posts of ``board.app.MAX_EVENTS`` events, one
after the other, as fast as the board answers, from a few seconds before the clock starts; the
instructor's grid latency (each ``api/grid`` answer's time) is what they cost the room.

Meanwhile the help queue (:mod:`labkit.workshop.board_load_queue`): each learner asks for help now and then (some
with a look), and cancels some; the instructor polls ``api/queue``, claims the first request and closes it; each
hostile learner also floods the queue with asks. A queue list out of order fails the run.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]  # no types published; not in the mypy overrides

from labkit.core.errors import LabkitError
from labkit.core.files import write_text
from labkit.core.machine import cpu_model
from labkit.progress.events import Event
from labkit.workshop.board.app import MAX_EVENTS, POLL_MS
from labkit.workshop.board_load_queue import QueueFigures, QueueLog, asker, help_flood, instructor
from labkit.workshop.board_service import PREFIX as BOARD
from labkit.workshop.load import ROOT, Hub, HubError, PeakSampler, cpu_seconds, request, workshop_hub

POLL_S = 0.25
FLOOD_HEAD_START_S = 5.0  # the flooders reach the board's limits before the honest learners start
INSTRUCTOR = "instructor"
EXERCISES = ("1.1", "1.2", "2.1", "2.2", "3.1", "3.2", "3.3", "4.1")


@dataclass(frozen=True)
class BoardLoadReport:
    """What the board did under ``learners`` posting every ``interval_s`` for ``seconds``."""

    learners: int
    hostile: int
    interval_s: float
    seconds: float
    posts: int
    failed_posts: int
    post_ms_median: float
    post_ms_p95: float
    latency_s_median: float  # post started -> the grid (api/grid) shows it
    latency_s_p95: float
    latency_s_max: float
    page_poll_s: float  # what the page adds at most
    board_cpu_s: float
    board_cpu_percent: float  # of one core, over the run
    board_peak_rss_mib: float
    grid_ms_median: float  # the instructor's api/grid, while everyone posts
    grid_ms_p95: float
    grid_ms_max: float
    hostile_posts: int
    hostile_stored: int  # events of the hostile learners the board kept
    cpu_model: str
    queue: QueueFigures | None = None  # the help queue's figures and order (None: a run without one)

    def to_text(self) -> str:
        lines = [
            f"room board: {self.learners} learners, one event each every {self.interval_s:g} s for {self.seconds:g} s "
            f"({self.posts} posts, {self.failed_posts} failed), on {self.cpu_model}",
            f"{self.hostile} hostile learners flooding: {self.hostile_posts} posts of {MAX_EVENTS} events, "
            f"{self.hostile_stored} events kept",
            f"instructor's grid: median {self.grid_ms_median:.0f} ms, p95 {self.grid_ms_p95:.0f} ms, "
            f"max {self.grid_ms_max:.0f} ms",
            f"post: median {self.post_ms_median:.0f} ms, p95 {self.post_ms_p95:.0f} ms",
            f"on the grid after: median {self.latency_s_median:.2f} s, p95 {self.latency_s_p95:.2f} s, "
            f"max {self.latency_s_max:.2f} s (the page polls every {self.page_poll_s:g} s on top)",
            f"board service: {self.board_cpu_s:.1f} CPU s ({self.board_cpu_percent:.1f} % of one core), "
            f"peak RSS {self.board_peak_rss_mib:.0f} MiB",
        ]
        return "\n".join(lines + ([self.queue.to_text()] if self.queue else []))


def board_process(hub: Hub) -> psutil.Process:
    for process in hub.processes():
        try:
            if "labkit.workshop.board" in process.cmdline():
                return process
        except psutil.Error:
            continue
    raise HubError(f"the board service is not running:\n{hub.log()}")


class _Pending:
    """Each learner's posted events not yet seen on the grid: (event time, post start)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiting: dict[str, list[tuple[float, float]]] = {}
        self.latencies: list[float] = []

    def add(self, learner: str, event_time: float, started: float) -> None:
        with self.lock:
            self.waiting.setdefault(learner, []).append((event_time, started))

    def seen(self, learner: str, last_activity: float, now: float) -> None:
        with self.lock:
            left = []
            for event_time, started in self.waiting.get(learner, []):
                if event_time <= last_activity:
                    self.latencies.append(now - started)
                else:
                    left.append((event_time, started))
            self.waiting[learner] = left


def _learner(url: str, name: str, token: str, interval: float, until: float, pending: _Pending,
             post_ms: list[float], failures: list[str]) -> None:
    draw = random.Random(name)
    time.sleep(draw.uniform(0, interval))
    while time.monotonic() < until:
        exercise = draw.choice(EXERCISES)
        solved = draw.random() < 0.3
        event = Event(name, "check", exercise, "solved" if solved else "not solved", "" if solved else f"{exercise}/other")
        started = time.monotonic()
        try:
            request(url, "POST", {"events": [json.loads(event.to_json())]}, token)
            pending.add(name, event.time, started)
        except OSError as exc:
            failures.append(f"{name}: {exc}")
        post_ms.append((time.monotonic() - started) * 1000)
        time.sleep(max(0.0, interval - (time.monotonic() - started)))


def _flood(url: str, name: str, token: str, until: float, posts: list[int]) -> None:
    """A hostile learner: full posts, back to back, until ``until`` (a refused post is simply sent again)."""
    while time.monotonic() < until:
        events = [json.loads(Event(name, "check", "1.1", "not solved", "1.1/other").to_json()) for _ in range(MAX_EVENTS)]
        with contextlib.suppress(OSError):
            request(url, "POST", {"events": events}, token)
        posts.append(1)


def _poll(url: str, token: str, until: float, pending: _Pending, grid_ms: list[float]) -> None:
    while time.monotonic() < until:
        started = time.monotonic()
        try:
            grid = request(url, token=token)
        except OSError:
            time.sleep(POLL_S)
            continue
        now = time.monotonic()
        grid_ms.append((now - started) * 1000)
        for row in grid["rows"]:
            if row["last_activity"] is not None:
                pending.seen(row["learner"], row["last_activity"], now)
        time.sleep(POLL_S)


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run_board_load(learners: int, interval: float, seconds: float, folder: Path, hostile: int = 0) -> BoardLoadReport:
    """Start the hub in ``folder`` and load its board (``hostile`` learners flooding it); the figures."""
    names = [f"learner{index:02d}" for index in range(learners)]
    floods = [f"flooder{index:02d}" for index in range(hostile)]
    with workshop_hub(folder, settings={"LABKIT_WORKSHOP_SPAWNER": "shared-account"}) as hub:
        hub.api("users", "POST", {"usernames": [*names, *floods, INSTRUCTOR]})
        tokens = {name: hub.learner_token(name) for name in [*names, *floods, INSTRUCTOR]}
        board = board_process(hub)
        events_url, grid_url = f"{hub.url}{BOARD}api/events", f"{hub.url}{BOARD}api/grid"
        request(grid_url, token=tokens[INSTRUCTOR])  # the board answers before the clock starts
        pending, post_ms, failures, grid_ms, flood_posts = _Pending(), list[float](), list[str](), list[float](), list[int]()
        queue_log, base = QueueLog(hostile=set(floods)), f"{hub.url}{BOARD}"
        cpu_before = cpu_seconds(board, tree=False)
        start = time.monotonic()
        until = start + seconds
        flooders = [threading.Thread(target=_flood, args=(events_url, name, tokens[name], until, flood_posts))
                    for name in floods]
        flooders += [threading.Thread(target=help_flood, args=(base, name, tokens[name], until, queue_log))
                     for name in floods]
        for thread in flooders:
            thread.start()
        time.sleep(FLOOD_HEAD_START_S if floods else 0)
        threads = [threading.Thread(target=_learner, args=(events_url, name, tokens[name], interval, until, pending,
                                                          post_ms, failures)) for name in names]
        threads.append(threading.Thread(target=_poll, args=(grid_url, tokens[INSTRUCTOR], until + 5, pending, grid_ms)))
        threads += [threading.Thread(target=asker, args=(base, name, tokens[name], EXERCISES, until, queue_log))
                    for name in names]
        threads.append(threading.Thread(target=instructor, args=(base, tokens[INSTRUCTOR], until, queue_log)))
        with PeakSampler() as sampler:
            sampler.watch("board", board)
            for thread in threads:
                thread.start()
            for thread in [*threads, *flooders]:
                thread.join()
            peak = sampler.forget("board")
        cpu = cpu_seconds(board, tree=False) - cpu_before
        elapsed = time.monotonic() - start
        stored = sum(len(request(f"{hub.url}{BOARD}api/me", token=tokens[name])["events"]) for name in floods)
    latencies = pending.latencies
    return BoardLoadReport(
        learners, hostile, interval, seconds, len(post_ms), len(failures),
        statistics.median(post_ms) if post_ms else float("nan"), _percentile(post_ms, 0.95),
        statistics.median(latencies) if latencies else float("nan"), _percentile(latencies, 0.95),
        max(latencies, default=float("nan")), POLL_MS / 1000, cpu, 100 * cpu / elapsed, peak / 2**20,
        statistics.median(grid_ms) if grid_ms else float("nan"), _percentile(grid_ms, 0.95),
        max(grid_ms, default=float("nan")), len(flood_posts), stored, cpu_model(), QueueFigures.of(queue_log))


def main(argv: list[str] | None = None, run: Callable[..., BoardLoadReport] = run_board_load) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.workshop.board_load", description=__doc__.split("\n")[0])
    parser.add_argument("--learners", "-n", type=int, default=30, help="simulated learners (default 30)")
    parser.add_argument("--hostile", type=int, default=0, help="learners flooding the board meanwhile (default 0)")
    parser.add_argument("--interval", type=float, default=3.0, help="seconds between one learner's events (default 3)")
    parser.add_argument("--seconds", type=float, default=180.0, help="how long they post (default 180)")
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "workshop-board-loadtest.json",
                        help="where to write the figures (default build/workshop-board-loadtest.json)")
    args = parser.parse_args(argv)
    if args.learners < 1 or args.hostile < 0 or args.interval <= 0 or args.seconds <= 0:
        parser.error("give at least one learner, no negative number of hostile ones, and a positive interval and duration")
    try:
        with tempfile.TemporaryDirectory(prefix="labkit-board-load-") as folder:
            report = run(args.learners, args.interval, args.seconds, Path(folder), hostile=args.hostile)
    except LabkitError as exc:
        print(f"workshop-board-loadtest: {exc}", file=sys.stderr)
        return 2
    print(report.to_text())
    args.json.parent.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = asdict(report)
    print(f"figures written to {write_text(args.json, json.dumps(figures, indent=2))}")
    if report.queue and report.queue.disorder:
        print(f"workshop-board-loadtest: THE HELP QUEUE WAS OUT OF ORDER in {len(report.queue.disorder)} places:",
              *report.queue.disorder[:10], sep="\n  ", file=sys.stderr)
        return 1
    return 1 if report.failed_posts else 0


if __name__ == "__main__":
    sys.exit(main())
