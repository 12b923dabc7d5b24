"""The look is read-only (labkit.workshop.look): the table of who may do what in a learner's server, headless.

The room test (tests/workshop/test_board_room.py, ``test_a_look_*``) shows the same over HTTPS on the real hub; these
check the table itself and that nothing a look reaches escapes it: every handler of a JupyterLab server that never asks
the authorizer answers only reading methods to anyone but the owner.
"""
from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from jupyterhub.services.auth import HubOAuth
from jupyterhub.singleuser.extension import JupyterHubIdentityProvider, JupyterHubUser
from tornado.web import HTTPError
from traitlets.utils.importstring import import_item

from labkit.workshop import look
from labkit.workshop.look import WHAT_A_LOOK_MAY, LookAuthorizer, LookIdentityProvider, server_arguments

OWNER = "stuck"
SERVER = f"access:servers!server={OWNER}/"  # what her token and a share with her server both carry
ACTIONS = ("read", "write", "execute")
# every resource Jupyter Server 2, jupyter_server_terminals and jupyter_lsp name, and one nobody names yet
RESOURCES = ("api", "config", "contents", "csp", "events", "files", "kernels", "kernelspecs", "lsp", "nbconvert", "server",
             "sessions", "terminals", "a-future-resource")


@pytest.fixture(autouse=True)
def her_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(look.SERVER_ACCOUNT, OWNER)


def hub_user(name: str, kind: str = "user", scopes: tuple[str, ...] = (SERVER,)) -> JupyterHubUser:
    return JupyterHubUser({"name": name, "kind": kind, "scopes": list(scopes)})


@pytest.fixture
def authorizer() -> LookAuthorizer:
    hub_auth = HubOAuth(api_token="unused", access_scopes={SERVER}, oauth_client_id=f"jupyterhub-user-{OWNER}")
    return LookAuthorizer(identity_provider=JupyterHubIdentityProvider(hub_auth=hub_auth))


def allowed(authorizer: LookAuthorizer, user: JupyterHubUser) -> set[tuple[str, str]]:
    with pytest.warns(DeprecationWarning):  # JupyterHub's own authorizer reads HubAuth.oauth_scopes
        return {(action, resource) for action in ACTIONS for resource in RESOURCES
                if authorizer.is_authorized(None, user, action, resource)}


def test_the_owner_may_do_everything(authorizer: LookAuthorizer):
    assert allowed(authorizer, hub_user(OWNER)) == {(action, resource) for action in ACTIONS for resource in RESOURCES}


def test_anyone_else_she_lets_in_may_only_read(authorizer: LookAuthorizer):
    guest = allowed(authorizer, hub_user("instructor"))
    assert guest == {("read", resource) for resource in ("api", "config", "contents", "kernelspecs", "kernels", "lsp",
                                                         "sessions", "terminals")}
    assert all(action == "read" for action, _ in WHAT_A_LOOK_MAY)
    for refused in [("write", "contents"), ("execute", "kernels"), ("write", "kernels"), ("write", "sessions"),
                    ("write", "terminals"), ("execute", "terminals"), ("write", "server"), ("read", "nbconvert"),
                    ("write", "nbconvert"), ("execute", "events"), ("read", "a-future-resource")]:
        assert refused not in guest, refused


@pytest.mark.parametrize("who", [
    hub_user(OWNER, kind="service"),  # a service the hub's config names like her
    hub_user(OWNER.upper()),
    hub_user(f"{OWNER}2"),
])
def test_only_the_hub_user_named_by_her_server_is_its_owner(authorizer: LookAuthorizer, who: JupyterHubUser):
    assert ("write", "contents") not in allowed(authorizer, who)
    assert ("read", "contents") in allowed(authorizer, who)


def test_a_server_that_names_no_owner_is_read_only_to_all(authorizer: LookAuthorizer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(look.SERVER_ACCOUNT)
    assert ("write", "contents") not in allowed(authorizer, hub_user(OWNER))
    monkeypatch.setenv(look.SERVER_ACCOUNT, "")
    assert ("execute", "kernels") not in allowed(authorizer, hub_user(OWNER))


def test_without_her_server_s_scope_nobody_may_read_even_her(authorizer: LookAuthorizer):
    assert allowed(authorizer, hub_user(OWNER, scopes=())) == set()
    assert allowed(authorizer, hub_user("instructor", scopes=("access:servers!server=other/",))) == set()


def request_as(user: JupyterHubUser | None, method: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """What :class:`LookIdentityProvider` answers a ``method`` request from ``user`` (as the hub's OAuth found them)."""
    async def hubs_answer(self: Any, handler: Any) -> JupyterHubUser | None:
        return user

    monkeypatch.setattr(JupyterHubIdentityProvider, "get_user", hubs_answer)
    handler = SimpleNamespace(request=SimpleNamespace(method=method, path="/user/stuck/lab/api/settings/x"))
    return asyncio.run(LookIdentityProvider(hub_auth=HubOAuth(api_token="unused")).get_user(handler))


@pytest.mark.parametrize("method", ["PUT", "POST", "PATCH", "DELETE", "PROPFIND"])
def test_anyone_else_is_refused_every_method_that_may_change_something(method: str, monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(HTTPError) as refused:
        request_as(hub_user("instructor"), method, monkeypatch)
    assert refused.value.status_code == 403
    owner = hub_user(OWNER)
    assert request_as(owner, method, monkeypatch) is owner


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS"])
def test_reading_methods_pass_to_the_authorizer(method: str, monkeypatch: pytest.MonkeyPatch):
    guest = hub_user("instructor")
    assert request_as(guest, method, monkeypatch) is guest
    assert request_as(None, "PUT", monkeypatch) is None  # not logged in: Jupyter Server's own 403 or log-in redirect


def test_the_room_s_spawner_starts_every_server_read_only_to_others(monkeypatch: pytest.MonkeyPatch):
    from jupyterhub.spawner import Spawner

    from labkit.workshop.spawner import LearnerSpawner

    monkeypatch.setattr(Spawner, "get_args", lambda self: ["--ServerApp.authorizer_class=allow-all-from-a-config"])
    args = LearnerSpawner().get_args()
    assert args[-2:] == server_arguments(), "the look's classes come last, so no Spawner.args undoes them"
    named = {arg.split("=")[0]: import_item(arg.split("=")[1]) for arg in args[-2:]}
    assert named == {"--ServerApp.authorizer_class": LookAuthorizer,
                     "--ServerApp.identity_provider_class": LookIdentityProvider}


def handler_routes() -> Iterator[tuple[str, type, str, Any]]:
    """Every (pattern, handler class, HTTP method, its function) a JupyterLab server like a learner's serves."""
    from jupyter_server.serverapp import ServerApp

    app = ServerApp()
    app.initialize(argv=[f"--ServerApp.root_dir={os.getcwd()}", "--ServerApp.port=0", "--ServerApp.open_browser=False"],
                   new_httpserver=False)

    def walk(router: Any) -> Iterator[tuple[str, type]]:
        for rule in router.rules:
            if hasattr(rule.target, "rules"):
                yield from walk(rule.target)
            elif inspect.isclass(rule.target):
                yield getattr(rule.matcher, "regex", rule.matcher).pattern, rule.target

    for pattern, handler in walk(app.web_app.default_router):
        for method in ("get", "head", "options", "post", "put", "patch", "delete"):
            defined_in = next((klass for klass in handler.__mro__ if method in vars(klass)), None)
            if defined_in is not None and not defined_in.__module__.startswith("tornado."):
                yield pattern, handler, method.upper(), getattr(handler, method)


def asks_the_authorizer(handler: type, function: Any) -> bool:
    """Whether ``function`` is wrapped by Jupyter Server's ``@authorized`` (its ``inner``, holding the resource), or
    ``handler`` asks the authorizer itself (the websockets' ``pre_get``)."""
    while function is not None:
        if function.__code__.co_name == "inner" and "resource" in function.__code__.co_freevars:
            return True
        function = getattr(function, "__wrapped__", None)
    return any("is_authorized(" in inspect.getsource(klass) for klass in handler.__mro__
               if klass.__module__.split(".")[0] in ("jupyter_server", "jupyter_server_terminals", "jupyter_lsp"))


@pytest.mark.slow
def test_every_handler_that_never_asks_the_authorizer_only_reads_for_a_look():
    """The handlers a look reaches past the authorizer: GETs that only read (a new one fails this test until looked at)."""
    pytest.importorskip("jupyterlab")
    unasked = {(handler.__module__ + "." + handler.__name__, method) for _, handler, method, function in handler_routes()
               if not asks_the_authorizer(handler, function) and not getattr(function, "__allow_unauthenticated", False)}
    # what only LookIdentityProvider refuses a look (every method but a reading one), JupyterLab's settings among them
    assert ("jupyterlab_server.settings_handler.SettingsHandler", "PUT") in unasked
    assert {method for _, method in unasked} - look.READING <= {"PUT", "POST", "DELETE", "PATCH"}, unasked
    reading = {name for name, method in unasked if method in look.READING}
    assert reading <= {
        "jupyterlab_server.handlers.LabHandler",  # the page
        "jupyterlab_server.handlers.NotFoundHandler",
        "jupyterlab_server.settings_handler.SettingsHandler",  # settings, workspaces, translations, licenses: read
        "jupyterlab_server.workspaces_handler.WorkspacesHandler",
        "jupyterlab_server.translations_handler.TranslationsHandler",
        "jupyterlab_server.listings_handler.ListingsHandler",
        "jupyterlab_server.licenses_handler.LicensesHandler",
        "jupyterlab.handlers.build_handler.BuildHandler",  # the build's status
        "jupyterlab.handlers.extension_manager_handler.ExtensionHandler",  # the list of extensions
        "jupyterlab.handlers.plugin_manager_handler.PluginHandler",  # the list of plugins
        "jupyterlab.handlers.announcements.NewsHandler",  # off in a room (LabApp.news_url=None)
        "jupyterlab.handlers.announcements.CheckForUpdateHandler",  # off in a room (NeverCheckForUpdate)
        "jupyter_server.services.api.handlers.IdentityHandler",  # /api/me: who is asking
    }, reading
