"""What every lab shares: device, timing, tables, plots, errors, noise filtering,
notebook setup, the exercise-checker framework and atomic file writes.

Nothing here knows about a particular lab. Only :mod:`labkit.core.plots` and
:mod:`labkit.core.widgets` import matplotlib or ipywidgets.
"""
