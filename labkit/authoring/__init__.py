"""The authors' build tools: executing notebooks, the student copy, the docs site, the wheel's labs.

Why a package of their own: nobody learning runs these; they need a checkout of labkit (notebooks/,
docs/). Command modules provide ``add_arguments(parser)`` and ``run(args) -> int``.
"""
