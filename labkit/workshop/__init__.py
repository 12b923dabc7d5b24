"""The workshop room: the hub's settings, learner accounts and workspaces, the solutions hand-out, the load test.

Why a package of its own: these modules serve the instructor of a room (and
the hub that runs their code as root), not the learner or the author, whose
commands stay in :mod:`labkit.learner` and :mod:`labkit.authoring`. Nothing here is imported by the labs.
"""
