"""Fast mode's per-node overhead with timelines kept, against the code before they were (issue 41, "Done means").

Why a script and not a test: it is a measurement (never a timed test), and it needs a second checkout.
Both labkits run in ONE process on the same graph (:class:`labkit.fx.overhead.TinyOpsChain`, as
``labkit bench``'s P1): the old tree's ``labkit`` package is imported from ``--old`` with the current one
set aside in ``sys.modules``, then both are kept side by side (the old one under ``labkit_old.*``).

Three variants are timed in interleaved rounds (plain GraphModule, old, new; a fresh order every round, so
drift and load hit all alike), each round a block of calls per variant; the estimate is the fastest block's
seconds per call (noise only adds time), the spread the IQR of the blocks. Two views:

- ``instrumented``: one call of ``InstrumentedModule`` (the timed region: the stamp per node and the
  per-run list), overhead per node = (variant - plain GraphModule) / nodes;
- ``run_once``: one recorded run of a fast-mode ``NodeProfiler`` (fresh inputs, the timed call, the
  durations, and in the new code the run's timeline), per node likewise; the profiler's records are
  cleared after each block, outside the clock.

    git worktree add --detach /tmp/pipeline-old 3a5ec51^
    python benchmarks/timeline_overhead.py --old /tmp/pipeline-old
"""
from __future__ import annotations

import argparse
import gc
import importlib
import random
import statistics
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any


def load_old_labkit(root: str, alias: str = "labkit_old") -> dict[str, ModuleType]:
    """``labkit.fx.profile`` and ``labkit.fx.overhead`` of the tree at ``root``, imported beside the current labkit
    (its modules kept under ``alias``)."""
    import labkit.fx.profile  # noqa: F401 - the current labkit is imported first, and put back afterwards

    current = {name: module for name, module in sys.modules.items() if name == "labkit" or name.startswith("labkit.")}
    for name in current:
        del sys.modules[name]
    sys.path.insert(0, root)
    loaded: dict[str, ModuleType] = {}
    try:
        wanted = {name: importlib.import_module(f"labkit.fx.{name}") for name in ("profile", "overhead")}
        if not wanted["profile"].__file__.startswith(root):
            raise SystemExit(f"the old labkit came from {wanted['profile'].__file__}, not from {root}")
    finally:
        sys.path.remove(root)
        loaded = {name: module for name, module in sys.modules.items() if name == "labkit" or name.startswith("labkit.")}
        for name in loaded:
            del sys.modules[name]
        sys.modules.update(current)
        sys.modules.update({alias + name[len("labkit"):]: module for name, module in loaded.items()})
    return wanted


def interleaved(variants: dict[str, Callable[[], Any]], rounds: int, number: int,
                after_block: Callable[[], None] = lambda: None) -> dict[str, list[float]]:
    """Seconds per call of each block of ``number`` calls, ``rounds`` blocks per variant, variants shuffled per round."""
    blocks: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants)
    shuffle = random.Random(0)
    for function in variants.values():  # warm up
        for _ in range(number):
            function()
        after_block()
    for _ in range(rounds):
        shuffle.shuffle(order)
        for name in order:
            function = variants[name]
            gc.collect()
            gc.disable()
            try:
                start = time.perf_counter()
                for _ in range(number):
                    function()
                blocks[name].append((time.perf_counter() - start) / number)
            finally:
                gc.enable()
            after_block()
    return blocks


def _iqr(values: list[float]) -> float:
    quartiles = statistics.quantiles(values, n=4)
    return quartiles[2] - quartiles[0]


def report(title: str, blocks: dict[str, list[float]], nodes: int, baseline: str | None) -> dict[str, float]:
    fastest = {name: min(times) for name, times in blocks.items()}
    print(f"\n{title} ({nodes} nodes, {len(next(iter(blocks.values())))} interleaved blocks each)")
    per_node: dict[str, float] = {}
    for name, times in blocks.items():
        added = (fastest[name] - fastest[baseline]) if baseline else fastest[name]
        per_node[name] = added / nodes * 1e6
        print(f"  {name:<22} fastest {fastest[name] * 1e3:8.3f} ms/call   "
              f"{'added ' if baseline else ''}{per_node[name]:6.3f} µs/node   IQR ± {_iqr(times) / nodes * 1e6:.3f} µs/node")
    return per_node


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", required=True, help="a checkout of the code before timelines (3a5ec51^)")
    parser.add_argument("--main", help="optionally a third tree (e.g. main before a change), timed beside the other two")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--number", type=int, default=20)
    args = parser.parse_args()

    import torch

    old = load_old_labkit(args.old)
    main_tree = load_old_labkit(args.main, "labkit_main") if args.main else None
    from labkit.fx import overhead as new_overhead
    from labkit.fx import profile as new_profile

    torch.set_num_threads(1)
    graph_module = new_profile.trace(new_overhead.TinyOpsChain(args.nodes))
    x = torch.zeros(16)
    old_instrumented = old["profile"].InstrumentedModule(graph_module)
    new_instrumented = new_profile.InstrumentedModule(graph_module)
    variants: dict[str, Callable[[], Any]] = {
        "plain GraphModule": lambda: graph_module(x),
        "old fast mode": lambda: old_instrumented(x),
        "new fast mode": lambda: new_instrumented(x),
    }
    if main_tree is not None:
        main_instrumented = main_tree["profile"].InstrumentedModule(graph_module)
        variants["main fast mode"] = lambda: main_instrumented(x)
    with torch.no_grad():
        blocks = interleaved(variants, args.rounds, args.number)
    instrumented = report("InstrumentedModule call (the timed region)", blocks, args.nodes, "plain GraphModule")

    model = new_overhead.TinyOpsChain(args.nodes)
    profilers = {"old NodeProfiler": old["profile"].NodeProfiler(model, x),
                 "new NodeProfiler": new_profile.NodeProfiler(model, x)}
    if main_tree is not None:
        profilers["main NodeProfiler"] = main_tree["profile"].NodeProfiler(model, x)

    def cleared() -> None:
        for profiler in profilers.values():
            profiler.totals.clear()
            for samples in profiler.samples.values():
                samples.clear()
            for kept in ("_runs_read", "_timelines"):  # the new code's clock reads and the timelines made of them
                getattr(profiler, kept, []).clear()
            if isinstance(vars(profiler).get("timelines"), list):  # main's code kept timelines in a plain list
                profiler.timelines.clear()

    def recorded(profiler: Any) -> Callable[[], Any]:
        """One recorded run with its timeline made (the new code makes it when asked, after the runs: asked here)."""
        if isinstance(vars(profiler).get("timelines"), list) or not hasattr(profiler, "_runs_read"):
            return profiler.run_once

        def run_and_keep() -> Any:
            profiler.run_once()
            return profiler.timelines

        return run_and_keep

    blocks = interleaved({name: recorded(profiler) for name, profiler in profilers.items()},
                         args.rounds, args.number, cleared)
    whole = report("NodeProfiler.run_once (one recorded fast-mode run)", blocks, args.nodes, None)

    print("\nratio new / old, per node:")
    print(f"  added in the timed region: {instrumented['new fast mode']:.3f} / {instrumented['old fast mode']:.3f} µs "
          f"= {instrumented['new fast mode'] / instrumented['old fast mode']:.2f}")
    print(f"  whole recorded run:        {whole['new NodeProfiler']:.3f} / {whole['old NodeProfiler']:.3f} µs "
          f"= {whole['new NodeProfiler'] / whole['old NodeProfiler']:.2f}")
    if main_tree is not None:
        print(f"  main, added in the timed region: {instrumented['main fast mode']:.3f} µs "
              f"= {instrumented['main fast mode'] / instrumented['old fast mode']:.2f} x old")
        print(f"  main, whole recorded run:        {whole['main NodeProfiler']:.3f} µs "
              f"= {whole['main NodeProfiler'] / whole['old NodeProfiler']:.2f} x old")


if __name__ == "__main__":
    main()
