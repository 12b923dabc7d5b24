"""Which host serves what in a room: the hub, the board, each learner's server.

Why a module of its own: a browser lets a page set cookies for its own host's
parent domains. With learners at ``NAME.hub.example.org`` (JupyterHub's
``subdomain_host`` alone) the hub's host is the parent of every learner's host,
so a learner's page can overwrite the hub's session-id and ``_xsrf`` cookies
(the instructor's forms then fail until she logs in again). With
``LABKIT_WORKSHOP_LEARNERS_DOMAIN`` each learner is at ``NAME.LEARNERS_DOMAIN``
instead: JupyterHub's ``public_url`` names the hub's host, its ``subdomain_host``
the learners' domain, and :func:`subdomain_hook` keeps services (the board) on
the hub's host, where no learner's page can name a cookie domain.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from jupyterhub.utils import subdomain_hook_idna

from labkit.workshop.settings import PREFIX, HubSettings


def hub_host(settings: HubSettings) -> str:
    """The hub's own host name (``SUBDOMAIN_HOST``'s), without scheme or port."""
    return urlsplit(settings.subdomain_host).hostname or ""


def learners_domain(settings: HubSettings) -> str:
    """The domain each learner's server is a subdomain of: ``LEARNERS_DOMAIN``, or the hub's host."""
    return settings.learners_domain or hub_host(settings)


def _with_port(settings: HubSettings, host: str) -> str:
    parts = urlsplit(settings.subdomain_host)
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


def learner_origin(settings: HubSettings, name: str) -> str:
    """Where learner ``name``'s server answers (scheme, host, port), as JupyterHub's hook names it."""
    return _with_port(settings, subdomain_hook_idna(name, learners_domain(settings), "user"))


def learner_url_template(settings: HubSettings) -> str:
    """Each learner's server with ``{name}`` for her name: the board's link to it (``LABKIT_BOARD_SERVER_URL``)."""
    return _with_port(settings, "{name}." + learners_domain(settings)) + "/user/{name}/"  # her JupyterLab there


def service_origin(settings: HubSettings, name: str) -> str:
    """Where service ``name`` answers: ``NAME--service.HUB_HOST``, on the hub's side of the room."""
    return _with_port(settings, subdomain_hook_idna(name, hub_host(settings), "service"))


def subdomain_hook(hub: str, learners: str) -> Callable[[str, str, str], str]:
    """JupyterHub's ``subdomain_hook``: users under ``learners``, services under ``hub`` (whatever domain it passes)."""
    def hook(name: str, domain: str, kind: str) -> str:
        return subdomain_hook_idna(name, learners if kind == "user" else hub, kind)
    return hook


def hub_host_settings(settings: HubSettings) -> dict[str, Any]:
    """The ``c.JupyterHub`` settings that put the hub, the board and the learners on their hosts (empty: no subdomains).

    ``hub_routespec`` names the hub's host, so the hub's proxy routes no other host to the hub
    (upstream: jupyterhub#2530); a learner's host serves her own ``/user/NAME/`` only.
    """
    if not settings.subdomain_host:
        return {}
    hub = hub_host(settings)
    if not settings.learners_domain:
        return {"subdomain_host": settings.subdomain_host, "hub_routespec": f"{hub}/"}
    return {"public_url": settings.subdomain_host + "/", "subdomain_host": _with_port(settings, settings.learners_domain),
            "subdomain_hook": subdomain_hook(hub, settings.learners_domain), "hub_routespec": f"{hub}/"}


def layout_warning(settings: HubSettings) -> str:
    """What the start log says when learners' pages can set cookies the hub's host receives ("" when they cannot).

    "Sharing a parent domain" is judged on the last two labels (``example.org``): a public suffix of two labels
    (``co.uk``) is then reported too, which errs on the side of saying so.
    """
    if not settings.subdomain_host:
        return ""
    hub = hub_host(settings)
    if not settings.learners_domain:
        return (f"labkit: learners are on NAME.{hub}, below the hub's own host: a learner's page can overwrite the hub's "
                f"session-id and _xsrf cookies (your forms then fail until you log in again). Set {PREFIX}LEARNERS_DOMAIN "
                "to a domain of its own, e.g. a separate registrable domain (workshop/README.md, Security).")
    shared = _parent(hub)
    if shared and shared == _parent(settings.learners_domain):
        return (f"labkit: the hub ({hub}) and the learners ({settings.learners_domain}) share the parent domain {shared}: "
                f"a learner's page can set cookies for {shared}, which browsers send to the hub. For a production room "
                "put the learners on a registrable domain of their own (workshop/README.md, Security).")
    return ""


def _parent(host: str) -> str:
    labels = host.split(".")
    return ".".join(labels[-2:]) if len(labels) > 2 else ""
