"""What a learner has done: each checker's verdict recorded as an event, their own table, tiered hints.

Why a package of its own, without torch: the room's board service (:mod:`labkit.workshop.board`) reads
the same events and must stay small; only the learner's kernel imports torch.

- :mod:`labkit.progress.events`: the event, the one record kernel, local file and board share;
- :mod:`labkit.progress.journal`: the learner's local file (``.labkit/progress.jsonl`` in the workspace);
- :mod:`labkit.progress.sender`: on a hub, the events sent to the board with the learner's own token;
- :mod:`labkit.progress.record`: what ``run_check`` and the preflight call;
- :mod:`labkit.progress.table`: the learner's own table (``python -m labkit progress``);
- :mod:`labkit.progress.hints`: ``hint("1.2")``, up to three hints of growing help;
- :mod:`labkit.progress.solutions`: ``solution("1.2")``, the reference solution after a try, recorded as seen;
- :mod:`labkit.progress.mistakes`: what each mistake id means, for the instructor's board.
"""
