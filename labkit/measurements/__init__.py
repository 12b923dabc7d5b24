"""The measurements behind labkit's claims: ``bench`` (every performance figure), ``zoo`` (which models
profile, and how) and ``fwad-sweep`` (forward AD over PyTorch's OpInfo database).

Why a package of their own: they are slow, they are for maintainers, and their figures go in the docs.
"""
