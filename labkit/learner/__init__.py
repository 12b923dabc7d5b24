"""The learner's commands: ``python -m labkit lab``, ``workspace``, ``progress``, ``doctor``, ``profile``.

Why a package of their own: these are what a learner (or an instructor's preflight) types; the
authors' build tools live in :mod:`labkit.authoring`, the measurements in :mod:`labkit.measurements`.
Every command module provides ``add_arguments(parser)`` and ``run(args) -> int`` (:mod:`labkit.__main__`).
"""
