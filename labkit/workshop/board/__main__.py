"""``python -m labkit.workshop.board``: what the hub runs for its ``labkit-board`` service.

Why so little here: the settings are checked (:mod:`~labkit.workshop.board.settings`), the events
opened (:mod:`~labkit.workshop.board.store`), and the application served
(:mod:`~labkit.workshop.board.app`) on ``JUPYTERHUB_SERVICE_URL``. A setting the board refuses is one
line on stderr and exit status 2 (the hub's log shows it). The hub stops a service with SIGINT (then
SIGTERM): either closes the database cleanly; SIGINT (Ctrl-C) is one line and exit status 130, as for
every labkit command, SIGTERM exit status 0.

By hand, against a hub you run (declare the service there with a ``url`` and an ``api_token`` but no
``command``, and give it the role :func:`labkit.workshop.board_service.board_roles` describes)::

    mkdir -m 700 /tmp/board
    JUPYTERHUB_API_TOKEN=<the service's api_token> JUPYTERHUB_API_URL=http://127.0.0.1:8081/hub/api \
    JUPYTERHUB_SERVICE_URL=http://127.0.0.1:10101 JUPYTERHUB_SERVICE_PREFIX=/services/labkit-board/ \
    JUPYTERHUB_SERVICE_NAME=labkit-board JUPYTERHUB_CLIENT_ID=service-labkit-board \
    LABKIT_BOARD_DB=/tmp/board/board.sqlite LABKIT_BOARD_EXERCISES=1.1,1.2 python -m labkit.workshop.board
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from jupyterhub.services.auth import HubOAuth
from tornado.httpserver import HTTPServer
from tornado.ioloop import PeriodicCallback

from labkit.core.errors import LabkitValueError
from labkit.workshop.board.app import MAX_BODY, Board, make_app
from labkit.workshop.board.hub import HubDirectory
from labkit.workshop.board.queue import HelpQueue
from labkit.workshop.board.queue_app import HubShareRevoker, expire_looks
from labkit.workshop.board.settings import BoardSettings, check_private_folder, read_cookie_secret
from labkit.workshop.board.store import EventStore
from labkit.workshop.board.sweep import SWEEP_MS, sweep_shares

log = logging.getLogger("labkit.workshop.board")
LOOK_CHECK_MS = 2000


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="[labkit-board %(asctime)s %(levelname)s] %(message)s")
    os.umask(0o077)  # whatever SQLite adds next to the database (-wal, -shm) is the board's alone
    try:
        settings = BoardSettings.from_environment()
        check_private_folder(settings.db)
        secret = read_cookie_secret(settings.cookie_secret_file)
    except LabkitValueError as exc:
        print(f"labkit-board: {exc}", file=sys.stderr)
        return 2
    hub_auth = HubOAuth(api_token=settings.api_token, api_url=settings.api_url, base_url=settings.prefix,
                        allow_token_in_url=False)
    if not hub_auth.access_scopes:
        print("labkit-board: JUPYTERHUB_OAUTH_ACCESS_SCOPES (or JUPYTERHUB_SERVICE_NAME) is not set: the hub sets it "
              "for a service it runs.", file=sys.stderr)
        return 2
    store = EventStore(settings.db)
    queue = HelpQueue(settings.db.with_name("help.sqlite"))  # the help queue: board/queue.py
    board = Board(settings, store, HubDirectory(settings.api_url, settings.api_token), queue=queue,
                  revoker=HubShareRevoker(settings.api_url, settings.api_token))
    try:
        stopped_by = asyncio.run(_serve(settings, board, hub_auth, secret))
    except KeyboardInterrupt:  # before the loop's own handler was in place
        stopped_by = signal.SIGINT
    finally:
        store.close()
        queue.close()
    if stopped_by == signal.SIGINT:
        print("labkit-board: stopped (SIGINT: Ctrl-C, or the hub stopping it)", file=sys.stderr)
        return 130
    return 0


async def _serve(settings: BoardSettings, board: Board, hub_auth: HubOAuth, secret: bytes) -> signal.Signals:
    """Serve until SIGINT or SIGTERM (even where SIGINT was ignored at start, as in a shell's background job)."""
    server = HTTPServer(make_app(board, hub_auth, secret), max_body_size=4 * MAX_BODY)  # the handler says 413 below that
    server.listen(settings.port, settings.host)
    log.info("serving the room board at http://%s:%d%s", settings.host, settings.port, settings.prefix)
    looks = PeriodicCallback(lambda: expire_looks(board), LOOK_CHECK_MS)  # a look ends on time with nobody polling
    looks.start()
    sweeper = PeriodicCallback(lambda: sweep_shares(board), SWEEP_MS)  # a share no open request explains is revoked
    sweeper.start()
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[signal.Signals] = loop.create_future()

    def stop_on(number: signal.Signals) -> None:
        if not stop.done():
            stop.set_result(number)

    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop_on, number)
    stopped_by = await stop
    looks.stop()
    sweeper.stop()
    server.stop()
    log.info("stopped by %s", stopped_by.name)
    return stopped_by


if __name__ == "__main__":
    sys.exit(main())
