"""Execute notebooks headless and store their outputs: ``make notebooks``.

Why: the committed notebooks are the documentation, and strict nbval compares
a fresh run with what is stored. They must therefore be executed the same way
every time: kernel ``python3``, the notebook's own folder as working directory
(so ``%load solutions/...`` works), seeds fixed by ``labkit.setup_notebook()``
in each notebook's first cell, and widget state stored so that the docs site
shows each widget's last state without a kernel. A notebook is rewritten only
after it ran to the end, atomically: an error leaves the stored copy untouched.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from labkit.errors import LabkitError

KERNEL = "python3"


def execute_notebook(path: str | Path, *, timeout: int = 600, write: bool = True) -> float:
    """Run every cell of ``path`` top to bottom; store outputs if ``write``. Returns wall seconds.

    Raises :class:`LabkitError` naming the notebook when a cell fails.
    """
    path = Path(path)
    notebook = nbformat.read(path, as_version=4)
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
        client.execute()
    except Exception as exc:  # nbclient raises CellExecutionError, DeadKernelError, ...
        raise LabkitError(f"{path.name} failed while executing; nothing was written.\n{exc}") from exc
    elapsed = time.perf_counter() - start
    if write:
        _write_atomically(notebook, path)
    return elapsed


def _write_atomically(notebook: nbformat.NotebookNode, path: Path) -> None:
    notebook.metadata.pop("papermill", None)
    fd, tmp_name = tempfile.mkstemp(suffix=".ipynb", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            nbformat.write(notebook, handle)
        os.chmod(tmp_name, 0o644)  # mkstemp makes the file private; notebooks are shared documents
        os.replace(tmp_name, path)
    except BaseException:
        os.unlink(tmp_name)
        raise


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.nbrun", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    parser.add_argument("--no-write", action="store_true", help="execute only, keep the stored copy")
    args = parser.parse_args(argv)
    failed = 0
    for path in args.notebooks:
        try:
            seconds = execute_notebook(path, timeout=args.timeout, write=not args.no_write)
        except LabkitError as exc:
            print(f"FAILED {path}: {exc}", file=sys.stderr)
            failed += 1
        else:
            print(f"ok {path} {seconds:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
