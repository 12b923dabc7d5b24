"""Lazy public names for a package: its ``__getattr__``, ``__dir__`` and ``__all__``.

Why: ``import labkit`` must stay cheap and headless, yet learners expect
``labkit.profile_model`` and ``labkit.memory_format.describe`` to just work. Each
package lists which submodule holds which public name; the submodule is imported
the first time one of its names is used (PEP 562).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__, __dir__, __all__`` for ``package``, given ``{submodule: names}``.

    Submodules are named relative to ``package`` (``"profile"``), or in full (``"labkit.fx.widgets"``).
    """
    where = {
        name: module if module.startswith("labkit.") else f"{package}.{module}"
        for module, names in exports.items()
        for name in names
    }
    public = sorted(where)

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:
        return public

    return __getattr__, __dir__, list(public)
