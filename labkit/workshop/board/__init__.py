"""The room board: a JupyterHub service that shows the instructor who solved what, and who is stuck.

Why a service of its own (modelled on jupyterhub-idle-culler: one small program with one job): the
learners' kernels send their checkers' verdicts (never code) with the learner's own hub token, the
board takes the learner's name from that token, and only instructors see the grid. The hub starts it
as ``python -m labkit.workshop.board`` (:mod:`labkit.workshop.board_service` writes its entry).

- :mod:`~labkit.workshop.board.settings`: the board's environment, checked before it starts;
- :mod:`~labkit.workshop.board.store`: the events, in SQLite, each kept once;
- :mod:`~labkit.workshop.board.grid`: the grid and the stuck rules, pure functions over the events;
- :mod:`~labkit.workshop.board.export`: the grid and the mistakes as CSV a spreadsheet cannot run;
- :mod:`~labkit.workshop.board.hub`: what the board asks the hub (its users, the instructors group);
- :mod:`~labkit.workshop.board.app`: the tornado handlers (the page, the API, the exports);
- :mod:`~labkit.workshop.board.words`: the page's words in the room's language (``LABKIT_LANG``);
- :mod:`~labkit.workshop.board.__main__`: what the hub runs;
- ``templates/board.html``, ``static/board.js``, ``static/board.css``: the page, with no inline script.
"""
