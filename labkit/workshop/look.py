"""The look is read-only: in a learner's own server, only she may write or run; anyone else the hub lets in may read.

Why: ``labkit.help("2.3", share=True)`` shares her server with the room's instructors through JupyterHub's sharing
API, and a share grants ``access:servers``, which Jupyter Server would take as a hand on her keyboard: run code, save
over her notebooks, open a terminal. Her consent is to a *look*. So every learner's server of a room
(:class:`labkit.workshop.spawner.LearnerSpawner`) runs with these two classes, in her server, as JupyterHub documents
for read-only access (``jupyterhub.singleuser.extension``):

- :class:`LookAuthorizer` (``ServerApp.authorizer_class``; the singleuser extension leaves Jupyter Server's
  allow-all default in place): the server's owner (``JUPYTERHUB_USER``, a hub *user*, not a service of that name)
  may do everything her token's scopes allow; anyone else only what :data:`WHAT_A_LOOK_MAY` lists, an allow-list
  of (action, resource): reading files and what JupyterLab needs to show them. Every write and every execute is 403:
  saving, uploading, renaming, deleting, checkpoints, kernels and their websockets, sessions, terminals, shutdown,
  nbconvert (which runs whatever exporters the server has), events, LSP servers.
- :class:`LookIdentityProvider` (``ServerApp.identity_provider_class``, over the singleuser extension's, whose
  config gives the command line's the last word): JupyterLab's own handlers never ask the authorizer (jupyterlab_server's
  settings and workspaces ``PUT``/``DELETE``, jupyterlab's build, extension manager and plugin manager ``POST``), so
  any request from someone else that is not a ``GET``, ``HEAD`` or ``OPTIONS`` is refused before a handler runs.
  Those handlers' ``GET`` only reads. Websockets are ``GET``: each asks the authorizer to ``execute`` (refused).

What each side can do to it. The learner owns her server: her code can stop it and serve another on its port, so
she can weaken only her own protection, never another's (her ``~/.jupyter`` config is ignored in a room:
``Spawner.disable_user_config``). An instructor can read every file her server shows, hidden ones excepted (Jupyter
Server's ``allow_hidden`` is off: her kernels' connection files under ``~/.local`` stay unread), and nothing more.
"""
from __future__ import annotations

import os
from typing import Any

from jupyter_server.auth import User
from jupyterhub.singleuser.extension import JupyterHubAuthorizer, JupyterHubIdentityProvider, JupyterHubUser
from tornado.web import HTTPError

# (action, resource) that someone other than the owner may: Jupyter Server's "read" on what JupyterLab loads to show a
# notebook (api: status, spec, resolvePath; config sections; contents, /files and /view; kernel specs; the lists of
# kernels, sessions and terminals, which name them and nothing more; the language servers' status).
WHAT_A_LOOK_MAY = frozenset(("read", resource) for resource in (
    "api", "config", "contents", "kernelspecs", "kernels", "sessions", "terminals", "lsp"))
READING = frozenset({"GET", "HEAD", "OPTIONS"})  # the methods that change nothing (Jupyter Server's "read")
SERVER_ACCOUNT = "JUPYTERHUB_USER"  # the hub user whose server this is (JupyterHub sets it for every server)


def owner() -> str:
    """The hub user this server belongs to ("" where the hub did not say: then nobody is its owner)."""
    return os.environ.get(SERVER_ACCOUNT, "")


def is_owner(user: User | None) -> bool:
    """Whether ``user`` (the singleuser extension's ``JupyterHubUser``) is the hub user whose server this is."""
    if not isinstance(user, JupyterHubUser):
        return False
    hub_user: dict[str, Any] = user.hub_user
    return bool(owner()) and hub_user.get("kind") == "user" and hub_user.get("name") == owner()


def a_look_may(action: str, resource: str) -> bool:
    """Whether someone other than the owner may ``action`` (read, write, execute) on ``resource``."""
    return (action, resource) in WHAT_A_LOOK_MAY


class LookAuthorizer(JupyterHubAuthorizer):
    """JupyterHub's authorizer (her token's ``access:servers`` scopes), and for anyone but her, read-only."""

    def is_authorized(self, handler: Any, user: User, action: str, resource: str) -> bool:
        if not super().is_authorized(handler, user, action, resource):
            return False
        if is_owner(user) or a_look_may(action, resource):
            return True
        self.log.warning("labkit: %s may only look at %s's server: %s on %s refused", user.username, owner(), action,
                         resource)
        return False


class LookIdentityProvider(JupyterHubIdentityProvider):
    """JupyterHub's identity provider, refusing anyone but her every request that may change something."""

    async def get_user(self, handler: Any) -> User | None:
        user: User | None = await super().get_user(handler)
        if user is not None and handler.request.method not in READING and not is_owner(user):
            self.log.warning("labkit: %s may only look at %s's server: %s %s refused", user.username, owner(),
                             handler.request.method, handler.request.path)
            raise HTTPError(403, f"{user.username} may only look at this server")
        return user


def server_arguments() -> list[str]:
    """What a learner's ``jupyterhub-singleuser`` gets on its command line to run with both classes."""
    return [f"--ServerApp.authorizer_class={__name__}.{LookAuthorizer.__name__}",
            f"--ServerApp.identity_provider_class={__name__}.{LookIdentityProvider.__name__}"]
