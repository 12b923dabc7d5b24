"""The path a call takes through labkit's modules: which files it goes back and forth between.

Why a tool of its own: "the pipeline reads one way" (issue 41, item 8) is a claim about
structure that a reader checks by following a call through the files; this follows it
for them. :func:`call_path` runs a callable under ``sys.setprofile`` and records, at every
Python call into a labkit function, which labkit module that function belongs to
(``fx/profile``, ``core/copies``), as the issue spells a path ("profile -> model_inputs ->
tracing -> model_inputs -> runs -> core/copies ..."); calls in a row into the same module
count once, and returning to a caller is no step (only calls are). From that sequence: the module-to-module transitions, the
returns to a module already left (``core/copies`` entered, left, entered again: one
return), and the distinct modules. Torch's own frames, fx's generated code and the
model's ``forward`` are not labkit's and do not count, so the figures are facts of
labkit's structure, not of timing: the same on every run.

``python -m labkit.authoring.call_path`` prints the figures for ``profile_model`` on
:func:`resnet_like` (what tests/fx/test_pipeline_path.py pins).
"""
from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

_LABKIT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class CallPath:
    """The labkit modules a call went through, in order (a module repeated only after another came between)."""

    modules: tuple[str, ...]

    @property
    def transitions(self) -> int:
        """Moves from one labkit module to another."""
        return max(len(self.modules) - 1, 0)

    @property
    def distinct(self) -> int:
        return len(set(self.modules))

    @property
    def returns(self) -> Counter[str]:
        """Per module, how many times the path came back to it after leaving it."""
        seen: set[str] = set()
        back: Counter[str] = Counter()
        for module in self.modules:
            if module in seen:
                back[module] += 1
            seen.add(module)
        return back

    @property
    def total_returns(self) -> int:
        return sum(self.returns.values())

    def returns_to(self, module: str) -> int:
        return self.returns[module]

    def summary(self, top: int = 8) -> str:
        worst = ", ".join(f"{module} {count}" for module, count in self.returns.most_common(top))
        return (
            f"{self.transitions} transitions, {self.total_returns} returns to a module already left, "
            f"{self.distinct} distinct modules; returns by module: {worst or 'none'}"
        )


def _module_of(filename: str, cache: dict[str, str | None]) -> str | None:
    """``"fx/profile"`` for a file of labkit, None for any other (torch's, the model's, fx's generated code)."""
    if filename not in cache:
        try:
            relative = Path(filename).resolve().relative_to(_LABKIT)
        except (ValueError, OSError):
            cache[filename] = None
        else:
            cache[filename] = str(relative.with_suffix("")).replace("\\", "/")
    return cache[filename]


def call_path(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, CallPath]:
    """Call ``function(*args, **kwargs)`` and say which labkit modules it went through: ``(its result, the path)``.

    Import the modules (call once) before: a first call's imports run module code, which is no part of the path.
    """
    cache: dict[str, str | None] = {}
    path: list[str] = []

    def record(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return  # returns, and C calls, enter no labkit function
        module = _module_of(frame.f_code.co_filename, cache)
        if module is not None and module != "authoring/call_path" and (not path or path[-1] != module):
            path.append(module)

    previous = sys.getprofile()
    sys.setprofile(record)
    try:
        result = function(*args, **kwargs)
    finally:
        sys.setprofile(previous)
    return result, CallPath(tuple(path))


def resnet_like() -> Any:
    """A small ResNet (stem, two residual blocks, one of them downsampling, pool, linear): what the path is measured on."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, inner: int, outer: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(inner, outer, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(outer)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(outer, outer, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(outer)
            self.downsample = (
                nn.Sequential(nn.Conv2d(inner, outer, 1, stride, bias=False), nn.BatchNorm2d(outer))
                if stride != 1 or inner != outer else nn.Identity()
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(out)) + self.downsample(x))

    class ResNetLike(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.relu = nn.ReLU()
            self.layer1 = nn.Sequential(Block(8, 8, 1))
            self.layer2 = nn.Sequential(Block(8, 16, 2))
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.layer2(self.layer1(self.relu(self.bn1(self.conv1(x)))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    generator_state = torch.random.get_rng_state()
    torch.manual_seed(0)
    try:
        return ResNetLike().eval()
    finally:
        torch.random.set_rng_state(generator_state)


def profile_path(**options: Any) -> CallPath:
    """The path of ``profile_model(resnet_like(), x, warmup=2, runs=5)`` (its defaults), after one call to import."""
    import torch

    from labkit.fx.profile import profile_model

    model, x = resnet_like(), torch.zeros(1, 3, 16, 16)
    profile_model(model, x, **options)
    return call_path(profile_model, model, x, **options)[1]


def main() -> None:
    path = profile_path()
    print("profile_model(resnet_like(), x):", path.summary())
    print(" -> ".join(path.modules[:40]), "..." if len(path.modules) > 40 else "")


if __name__ == "__main__":
    main()
