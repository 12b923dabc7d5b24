"""The board's sweeper: a learner's server shared with an instructor that no open request explains is unshared.

Why: a look lasts the life of its help request (:mod:`labkit.workshop.board.queue_app` revokes it when the request
ends), but a learner holds ``shares!user`` and can share her server with an instructor again by herself, with no
request at all, or after hers ended. Such a share gives the instructor standing access to a page the learner
controls, which the room never asked for. Every few seconds the board lists what is shared with each instructor
(its role's ``users:shares!group=instructors``) and revokes each learner's share that no open request of hers with
a look explains. Servers of the instructors and admins themselves are theirs to share and are left alone.

The queue is read after the shares are listed, so a share made for a request is never swept: a learner's kernel
shares only once the board has stored her request (:func:`labkit.progress.help.help`).
"""
from __future__ import annotations

import logging

from labkit.workshop.board.app import Board
from labkit.workshop.board.queue_app import instructors_of

log = logging.getLogger("labkit.workshop.board")
SWEEP_MS = 5000


async def sweep_shares(board: Board) -> list[tuple[str, str, str]]:
    """Revoke every share with an instructor that no open request with a look explains; those revoked
    (instructor, owner, server)."""
    if board.queue is None or board.revoker is None:
        return []
    instructors = await instructors_of(board)
    staff = instructors | {user["name"] for user in await board.directory.users() or () if user.get("admin")}
    revoked = []
    for instructor in sorted(instructors):
        for owner, server in await board.revoker.shared_with(instructor) or ():
            if owner in staff or any(request.look for request in board.queue.of(owner)):
                continue
            if await board.revoker.revoke_share(instructor, owner, server):
                log.warning("revoked %s's share of %s/%s: no open help request of hers asked for a look",
                            instructor, owner, server)
                revoked.append((instructor, owner, server))
    return revoked
