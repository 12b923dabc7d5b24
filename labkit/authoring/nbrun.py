"""Execute notebooks headless and store their outputs: ``make notebooks``.

Why: the committed notebooks are the documentation, and strict nbval compares
a fresh run with what is stored. They must therefore be executed the same way
every time: kernel ``python3``, the notebook's own folder as working directory
(so ``%load solutions/...`` works), seeds fixed by ``labkit.setup_notebook()``
in each notebook's first cell, and widget state stored so that the docs site
shows each widget's last state without a kernel. A notebook is rewritten only
after it ran to the end, atomically: an error leaves the stored copy untouched.
Its kernel records no progress (``LABKIT_PROGRESS=off``): the solved labs'
verdicts are nobody's, and every run of a reference notebook comes through here
(``make notebooks``, ``labkit i18n build``, ``make bench``, ``labkit gpu-check``).

Every path is validated before anything runs, so a typo cannot leave half the
notebooks re-executed. Ctrl-C (SIGINT) or SIGTERM stops the whole run at once:
nbclient handles those signals itself (it shuts the kernel down and lets the
run go on to the next notebook), so each notebook runs in a worker thread,
where nbclient installs no handlers, and the main thread keeps the signals.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any

import nbformat
from jupyter_core.utils import ensure_async
from nbclient import NotebookClient

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.files import writable_target, write_file
from labkit.progress import journal

KERNEL = "python3"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
CLEANUP_S = 60  # how long a stopped run may take to shut its kernel down


class StopRequested(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: stop everything. A KeyboardInterrupt, so callers treat it like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def read_notebook(path: str | Path, *, write: bool = True) -> nbformat.NotebookNode:
    """Read and validate ``path`` as a notebook (and, if ``write``, make sure it can be rewritten).

    Raises :class:`LabkitValueError` that names the path and says what is wrong:
    missing, a folder or special file, not UTF-8, not JSON, or JSON that is not a notebook.
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise LabkitValueError(f"{path} does not exist; give the path of a .ipynb notebook.") from None
    except OSError as exc:
        raise LabkitValueError(f"Cannot read {path}: {exc.strerror}.") from None
    if not stat.S_ISREG(mode):  # a FIFO would block the read forever
        kind = "a folder" if stat.S_ISDIR(mode) else "a special file (a device, FIFO or socket)"
        raise LabkitValueError(f"{path} is {kind}, not a notebook; give the path of a .ipynb file.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise LabkitValueError(f"{path} is not a text file, so not a notebook; give the path of a .ipynb file.") from None
    except OSError as exc:
        raise LabkitValueError(f"Cannot read {path}: {exc.strerror}.") from None
    try:
        notebook = nbformat.reads(text, as_version=4)
        nbformat.validate(notebook)
    except nbformat.reader.NotJSONError:
        raise LabkitValueError(f"{path} is not JSON, so not a notebook; give the path of a .ipynb file.") from None
    except Exception as exc:  # noqa: BLE001 - nbformat raises ValidationError, AttributeError, TypeError, ...
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise LabkitValueError(f"{path} is JSON but not a valid Jupyter notebook ({reason}).") from None
    if write:
        writable_target(path)
    return notebook


def execute_notebook(path: str | Path, *, timeout: int = 600, write: bool = True) -> float:
    """Run every cell of ``path`` top to bottom; store outputs if ``write``. Returns wall seconds.

    Raises :class:`LabkitValueError` for a path that is not a notebook, and
    :class:`LabkitError` naming the notebook when a cell fails. A KeyboardInterrupt
    while it runs shuts the kernel down, writes nothing and is re-raised.
    """
    notebook = read_notebook(path, write=write)
    seconds = _execute(Path(path), notebook, timeout=timeout)
    if write:
        _store(Path(path), notebook)
    return seconds


def executed_copy(path: str | Path, *, timeout: int = 600,
                  extra_cells: tuple[str, ...] = ()) -> tuple[nbformat.NotebookNode, float]:
    """Run ``path`` top to bottom, then ``extra_cells`` (code), in its folder, writing nothing; the executed
    notebook and wall seconds. Errors as :func:`execute_notebook`'s. (``gpu-check`` reads what the cells printed.)"""
    notebook = read_notebook(path, write=False)
    notebook.cells.extend(nbformat.v4.new_code_cell(source) for source in extra_cells)
    return notebook, _execute(Path(path), notebook, timeout=timeout)


def run_record(seconds: float) -> dict[str, Any]:
    """What the stored outputs were measured on, kept in the notebook's metadata (``labkit``).

    Why: a run time is a measurement, so the docs site states the one this run
    took, with the machine it took it on, instead of a promise that another
    machine would contradict.
    """
    return {"run_seconds": round(seconds, 1), "cpu_count": os.cpu_count()}


def _execute(path: Path, notebook: nbformat.NotebookNode, *, timeout: int) -> float:
    """Execute ``notebook`` in place, in ``path``'s folder, recording the run in its metadata; wall seconds."""
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name=KERNEL,
        resources={"metadata": {"path": str(path.parent.resolve())}},
        store_widget_state=True,
        record_timing=False,
    )
    start = time.perf_counter()
    try:
        _run_in_worker(client)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # nbclient raises CellExecutionError, DeadKernelError, ...
        raise LabkitError(f"{path.name} failed while executing; nothing was written.\n{exc}") from exc
    seconds = time.perf_counter() - start
    notebook.metadata["labkit"] = run_record(seconds)
    return seconds


def kernel_environment() -> dict[str, str]:
    """The environment a reference notebook's kernel starts with: this process's, progress recording off.

    Why off whatever the caller's environment says: its checker cells judge the solved labs, and their verdicts
    would otherwise join the author's own journal (outside a workspace, the platform's user data folder)."""
    return {**os.environ, journal.ENVIRONMENT: "off"}


def _store(path: Path, notebook: nbformat.NotebookNode) -> None:
    """Replace ``path`` atomically (through a symlink, never a special file)."""
    notebook.metadata.pop("papermill", None)
    write_file(path, lambda handle: nbformat.write(notebook, handle))


def _run_in_worker(client: NotebookClient) -> None:
    """``client.execute()`` in a thread of its own; the calling thread keeps the signals.

    When the caller is interrupted while waiting, the run is cancelled, the
    kernel shut down (nbclient's own cleanup, then ours for a kernel still
    starting), and the interrupt re-raised.
    """
    started, done = threading.Event(), threading.Event()
    state: dict[str, Any] = {}

    async def run() -> None:
        state["loop"], state["task"] = asyncio.get_running_loop(), asyncio.current_task()
        started.set()
        try:
            await client.async_execute(env=kernel_environment())
        finally:  # cancelled while the kernel was starting: nbclient does not clean up then
            km = client.km
            if km is not None and km.has_kernel:
                await ensure_async(km.shutdown_kernel(now=True))

    def work() -> None:
        try:
            asyncio.run(run())
        except BaseException as exc:  # handed to the waiting thread
            state["error"] = exc
        finally:
            started.set()
            done.set()

    # Waits use an Event, not Thread.join: an interrupted join marks a running thread as stopped.
    threading.Thread(target=work, name="labkit-nbrun", daemon=True).start()
    try:
        while not done.wait(0.5):  # a bounded wait, so a signal handler runs promptly
            pass
    except BaseException:
        started.wait()
        if "task" in state:
            client.shutdown_kernel = "immediate"  # its outputs are discarded anyway
            with suppress(RuntimeError):  # the loop already closed: the run ended by itself
                state["loop"].call_soon_threadsafe(state["task"].cancel)
        done.wait(CLEANUP_S)
        raise
    if "error" in state:
        raise state["error"]


class _SignalGuard:
    """In the main thread, turn the first SIGINT or SIGTERM into :class:`StopRequested`; ignore later ones.

    Why ignore: a second Ctrl-C would otherwise abort the kernel shutdown that
    the first one started. ``holding()`` delays the exception until a write is done.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._holding = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN:  # as Python does: an ignored signal stays ignored
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum
            if not self._holding:
                raise StopRequested(signum)

    @contextmanager
    def holding(self) -> Iterator[None]:
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
            if self.received is not None:  # also when the held block failed: stopping comes first
                raise StopRequested(self.received)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    parser.add_argument("--no-write", action="store_true", help="execute only, keep the stored copy")


def run(args: argparse.Namespace) -> int:
    """``python -m labkit notebooks``: execute each notebook and store it with its outputs."""
    write = not args.no_write
    notebooks, problems = [], []
    for path in args.notebooks:
        try:
            notebooks.append((path, read_notebook(path, write=write)))
        except LabkitValueError as exc:
            problems.append(str(exc))
    if problems:
        print("\n".join(problems) + "\nNothing was executed or written.", file=sys.stderr)
        return 2
    failed = finished = 0
    with _SignalGuard() as guard:
        try:
            for path, notebook in notebooks:
                try:
                    seconds = _execute(path, notebook, timeout=args.timeout)
                    with guard.holding():  # a notebook is either fully written and reported, or untouched
                        if write:
                            _store(path, notebook)
                        print(f"ok {path} {seconds:.1f} s", flush=True)
                        finished += 1
                except LabkitError as exc:
                    print(f"FAILED {path}: {exc}", file=sys.stderr)
                    failed += 1
                    finished += 1
        except KeyboardInterrupt as exc:
            signum = exc.signum if isinstance(exc, StopRequested) else signal.SIGINT
            untouched = ", ".join(str(p) for p, _ in notebooks[finished:]) or "none"
            print(f"Interrupted by {signal.Signals(signum).name}: stopped the run. "
                  f"Left unchanged: {untouched}.", file=sys.stderr)
            return 128 + signum
    return 1 if failed else 0

