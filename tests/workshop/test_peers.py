"""labkit.workshop.peers: the account at the other end of a real loopback connection, this one's and another's."""
from __future__ import annotations

import os
import pwd
import socket
import subprocess

import pytest

from labkit.workshop.peers import peer_uid

SECONDS = 30


@pytest.mark.parametrize("family, host", [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::")])
def test_the_peer_of_a_loopback_connection_is_this_account(family: int, host: str):
    with socket.socket(family) as server:
        server.bind((host, 0))
        server.listen()
        with socket.create_connection(("127.0.0.1", server.getsockname()[1]), timeout=SECONDS):
            accepted, _ = server.accept()
            with accepted:
                assert peer_uid(accepted.getpeername()[:2], accepted.getsockname()[:2]) == os.geteuid()


def test_the_peer_of_another_accounts_connection_is_that_account():
    if os.geteuid() != 0:
        pytest.skip("only root can connect as another account")
    nobody = pwd.getpwnam("nobody")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(SECONDS)
        code = f"import socket, sys; c = socket.create_connection(('127.0.0.1', {server.getsockname()[1]})); sys.stdin.read()"
        client = subprocess.Popen(["/usr/bin/python3", "-c", code], user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
                                  stdin=subprocess.PIPE, cwd="/")
        try:
            accepted, _ = server.accept()
            with accepted:
                assert peer_uid(accepted.getpeername()[:2], accepted.getsockname()[:2]) == nobody.pw_uid
        finally:
            client.communicate(timeout=SECONDS)


def test_no_such_connection_is_none():
    assert peer_uid(("127.0.0.1", 1), ("127.0.0.1", 2)) is None
