"""Authoring and instructor tools, each behind ``python -m labkit <tool>``.

Every tool module provides ``add_arguments(parser)`` and ``run(args) -> int``;
:mod:`labkit.__main__` wires them together. None has its own entry point.
"""
