"""The HTTPS proxy in front of a room: Caddy, started and stopped by the hub as one of its services.

Why Caddy: it is in Debian's archive (``apt-get install caddy``), speaks HTTPS
and websockets by default, and has a certificate authority of its own
(``tls internal``) for a room without a public name. What it adds for the room:

- a site, with its certificate, for each kind of host: the hub's; the board's and
  the learners' wildcard (``LEARNERS_DOMAIN``), or one wildcard below the hub's name
  for both; from the instructor's files or Caddy's local CA. The board's and the
  learners' hosts answer 404 to ``/hub/`` before the hub's proxy sees it;
- ``Strict-Transport-Security`` on every answer, so a browser that once saw the
  room never speaks plain HTTP to it again;
- the client's own address as the only ``X-Forwarded-For`` entry (whatever the
  client sent is dropped), and, on the hub's name only, the front proxy's secret
  (:data:`labkit.workshop.auth.FRONT_PROXY_HEADER`) that makes the hub believe it.
  A learner's host never gets the secret: her server sees every header of the
  requests it answers. A learner's code reaching the hub's own proxy on
  loopback cannot send it, so she cannot make the log-in limit count her
  guesses against someone else's address;
- to the hub's proxy, only the cookies the room's pages read (:func:`cookie_filter`):
  a learner's page can set cookies for the parent domain, which the browser then
  sends to every host of the room (45 KB of them made the hub's proxy answer 431
  to the hub, the board and every other learner's server); Caddy drops them.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from labkit.core.errors import LabkitError
from labkit.core.files import write_text
from labkit.workshop.auth import FRONT_PROXY_HEADER
from labkit.workshop.board_service import NAME as BOARD
from labkit.workshop.hosts import hub_host, service_origin
from labkit.workshop.room import front_proxy_secret
from labkit.workshop.settings import PREFIX, HubSettings

CADDYFILE = "Caddyfile"
HSTS = "max-age=31536000"  # a year; no includeSubDomains or preload: the instructor's domain may hold other sites
NOT_THE_HUB = "Not here: the hub is at"  # what a learner's or the board's host answers to /hub/ (404)
INSTALL = "Debian/Ubuntu: apt-get install caddy (https://caddyserver.com/docs/install for others)"


# The cookies a page of the room reads, each with the values it can hold (never the size a tossed one has):
# JupyterHub's and the board's __Host- cookies (log-in, OAuth state; no other host can set them), the _xsrf
# token (JupyterHub's and JupyterLab's: signed, url-safe) and JupyterHub's session id (32 hex digits).
KEPT_COOKIES = (r"__Host-[A-Za-z0-9._-]{1,100}=[^; ]{1,600}", r"_xsrf=[A-Za-z0-9_=|:.-]{1,400}",
                r"jupyterhub-session-id=[0-9a-f]{32}")


def cookie_filter() -> str:
    """The regular expression (RE2) whose every match, replaced by ``$1;``, leaves only :data:`KEPT_COOKIES`.

    Each match is one cookie and its ``;``: group 1 holds it if it is kept, nothing otherwise. Why a
    filter and not a larger header limit: a browser keeps about 180 cookies of 4 KB for the parent
    domain, more than any server's limit; what the room's pages read is small and known.
    """
    return f"[ ]*(?:((?:{'|'.join(KEPT_COOKIES)}))[ ]*(?:;|$)|[^;]*(?:;|$))"


class FrontProxyError(LabkitError):
    """The room cannot start its HTTPS proxy."""


def caddy_root(settings: HubSettings) -> Path:
    """Caddy's own folder in the hub's state (its local CA, certificates, configuration): the hub account's alone."""
    return settings.state / "caddy"


def local_ca_certificate(settings: HubSettings) -> Path:
    """The root certificate of Caddy's local CA: what browsers must trust where the room has no certificate of its own."""
    return caddy_root(settings) / "data" / "caddy" / "pki" / "authorities" / "local" / "root.crt"


def caddyfile(settings: HubSettings, secret: str) -> str:
    """Caddy's configuration for the room: HTTPS for the hub's host, the board's and the learners', to the hub's proxy.

    One site per kind of host, each with its certificate: only the hub's gets the front proxy's secret, and
    the board's and the learners' refuse ``/hub/`` before the hub's proxy sees it (no page of the hub there).
    """
    parts = urlsplit(settings.subdomain_host)
    port = parts.port or 443
    tls = f"tls {settings.tls_certificate} {settings.tls_key}" if settings.tls_certificate else "tls internal"
    upstream = f"{'127.0.0.1' if settings.ip in ('0.0.0.0', '::', '') else settings.ip}:{settings.port}"
    hub = hub_host(settings)

    def site(names: str, secret_header: str, refuse_hub: bool) -> str:
        refusal = (f"\t@hub path /hub /hub/*\n\trespond @hub \"{NOT_THE_HUB} {settings.subdomain_host}/hub/\" 404\n"
                   if refuse_hub else "")
        return f"""{names} {{
\t{tls}
\theader Strict-Transport-Security "{HSTS}"
{refusal}\treverse_proxy {upstream} {{
\t\theader_up X-Forwarded-For {{remote_host}}
\t\theader_up -X-Real-Ip
\t\theader_up X-Scheme https
\t\theader_up {secret_header}
\t\theader_up Cookie "{cookie_filter()}" "$1;"
\t}}
}}
"""
    # Learners under the hub's host: one wildcard for them and the board; else the board's name and the learners' wildcard.
    board = urlsplit(service_origin(settings, BOARD)).hostname
    others = [f"*.{hub}"] if not settings.learners_domain else [str(board), f"*.{settings.learners_domain}"]
    return (f"""{{
\tadmin off
\tstorage file_system {caddy_root(settings) / 'data' / 'caddy'}
\tskip_install_trust
\tauto_https disable_redirects
\thttps_port {port}
}}
""" + site(f"{hub}:{port}", f"{FRONT_PROXY_HEADER} {secret}", refuse_hub=False)
            + "".join(site(f"{names}:{port}", f"-{FRONT_PROXY_HEADER}", refuse_hub=True) for names in others))


def caddy_service(settings: HubSettings) -> dict[str, Any]:
    """Caddy as a service the hub starts and stops with itself, its configuration written (0600) in the state folder."""
    caddy = shutil.which("caddy")
    if caddy is None:
        raise FrontProxyError(f"{PREFIX}CADDY=yes, but caddy is not installed: {INSTALL}.")
    root = caddy_root(settings)
    root.mkdir(mode=0o700, exist_ok=True)
    config = root / CADDYFILE
    write_text(config, caddyfile(settings, front_proxy_secret(settings)))
    config.chmod(0o600)
    home = {"HOME": str(root), "XDG_CONFIG_HOME": str(root / "config"), "XDG_DATA_HOME": str(root / "data")}
    return {"name": "https-proxy", "command": [caddy, "run", "--adapter", "caddyfile", "--config", str(config)],
            "environment": home}
