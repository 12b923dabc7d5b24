"""The hub's settings (labkit.workshop.settings): a room separates learners by default, and weak settings are refused."""
from __future__ import annotations

from pathlib import Path

import pytest

from labkit.core.errors import LabkitValueError
from labkit.workshop.settings import HubSettings, is_loopback

ROOT_UID, LEARNER_UID = 0, 4242
STRONG = "correct horse battery staple, 32+ characters long"


def settings(euid: int = ROOT_UID, **env: str) -> HubSettings:
    return HubSettings.from_environment({f"LABKIT_WORKSHOP_{name.upper()}": value for name, value in env.items()}, euid)


@pytest.mark.parametrize("name, value, message", [
    ("TRACK", "short", "choose one of all, core"),
    ("SPAWNER", "docker", "choose one of shared-account, system-users"),
    ("PORT", "eighty", "give a whole number"),
    ("PASSWORD", "only-the-learners-one", "Set both"),
    ("THREADS", "0", "at least 1"),
    ("THREADS", "two", "give a whole number"),
    ("KERNEL_CULL_AFTER_S", "-5", "at least 1"),
    ("ADMIN", "Instructor Smith", "an account name is a lowercase letter"),
    ("ADMIN", "<b>x</b>", "an account name is a lowercase letter"),
    ("ACCOUNT_PREFIX", "way-too-long-", "up to 7"),
    ("UNSAFE_SHARED_ACCOUNT_BEYOND_LOOPBACK", "maybe", "give yes or no"),
    ("CADDY", "yes", "CADDY=yes serves the room over HTTPS at LABKIT_WORKSHOP_SUBDOMAIN_HOST: set it"),
    ("TLS_CERTIFICATE", "/etc/ssl/room.pem", "Set both LABKIT_WORKSHOP_TLS_CERTIFICATE and LABKIT_WORKSHOP_TLS_KEY"),
])
def test_bad_settings_are_refused_with_what_to_do(name: str, value: str, message: str):
    with pytest.raises(LabkitValueError, match=message):
        settings(**{name: value})


def test_a_root_hub_separates_learners_by_default():
    room = settings()
    assert room.spawner == "system-users" and room.separated
    assert room.account("ada") == "labkit-ada"
    assert room.workspace("ada") == Path("/home/labkit-ada/labkit-workspace")
    assert room.learner_python == Path("/opt/labkit/venv/bin/python")
    assert room.edition == Path("/opt/labkit/edition/core")


def test_a_hub_beyond_loopback_separates_learners_and_needs_root():
    with pytest.raises(LabkitValueError, match="only a hub running as root"):
        settings(LEARNER_UID, ip="0.0.0.0")
    assert settings(ROOT_UID, ip="0.0.0.0").separated


def test_the_shared_account_is_for_a_non_root_hub_on_loopback():
    trusted = settings(LEARNER_UID)
    assert trusted.spawner == "shared-account" and not trusted.separated
    assert trusted.workspace("ada").parts[-3:] == ("learners", "ada", "labkit-workspace")


@pytest.mark.parametrize("ip", ["0.0.0.0", "", "10.1.2.3", "::", "hub.example.org"])
def test_the_shared_account_never_listens_beyond_loopback_by_accident(ip: str):
    with pytest.raises(LabkitValueError, match="UNSAFE_SHARED_ACCOUNT_BEYOND_LOOPBACK=yes"):
        settings(LEARNER_UID, ip=ip, spawner="shared-account")
    loud = settings(LEARNER_UID, ip=ip, spawner="shared-account", unsafe_shared_account_beyond_loopback="yes")
    assert loud.spawner == "shared-account"


@pytest.mark.parametrize("ip, loopback", [("127.0.0.1", True), ("127.8.0.1", True), ("::1", True), ("localhost", True),
                                          ("0.0.0.0", False), ("", False), ("192.168.0.2", False)])
def test_loopback(ip: str, loopback: bool):
    assert is_loopback(ip) is loopback


@pytest.mark.parametrize("password, admin_password, message", [
    ("seven77", STRONG, "at least 8"),
    ("learners-password", "short-admin-password", "at least 32"),
    (STRONG, STRONG, "must differ"),
])
def test_shared_passwords_have_minimums(password: str, admin_password: str, message: str):
    with pytest.raises(LabkitValueError, match=message):
        settings(password=password, admin_password=admin_password)


def test_strong_shared_passwords_are_taken():
    assert settings(password="learners-password", admin_password=STRONG).password == "learners-password"


def test_defaults_are_loopback_core_track_and_no_shared_password():
    trusted = settings(LEARNER_UID)
    assert (trusted.ip, trusted.track, trusted.password, trusted.spawner) == ("127.0.0.1", "core", "", "shared-account")
    assert (trusted.threads, trusted.kernel_cull_after_s, trusted.mem_limit) == (2, 1800, "2G")


@pytest.mark.parametrize("host, message", [
    ("hub.example.org", "give a scheme and a host name only"),
    ("https://hub.example.org/jupyter", "give a scheme and a host name only"),
    ("ftp://hub.example.org", "give a scheme and a host name only"),
    ("http://hub.example.org", "need https://"),
])
def test_a_subdomain_host_is_a_scheme_and_a_host(host: str, message: str):
    with pytest.raises(LabkitValueError, match=message):
        settings(subdomain_host=host)


def test_subdomain_hosts_taken():
    assert settings(subdomain_host="https://hub.example.org/").subdomain_host == "https://hub.example.org"
    local = settings(subdomain_host="http://localhost:8000")
    assert local.isolated_origins and not settings().isolated_origins


def test_the_instructor_holds_no_standing_access_to_learners_servers():
    for each in (settings(), settings(subdomain_host="http://localhost:8000")):
        assert not [scope for scope in each.instructor_scopes if scope.startswith(("access:servers", "shares"))]


def test_the_loud_settings_and_the_learner_cap():
    assert settings(unsafe_every_participant_trusted="yes").unsafe_trusted
    assert not settings().unsafe_trusted
    assert (settings().max_learners, settings(max_learners="12").max_learners) == (40, 12)
    with pytest.raises(LabkitValueError, match="MAX_LEARNERS=0: give a whole number of at least 1"):
        settings(max_learners="0")
    with pytest.raises(LabkitValueError, match="give yes or no"):
        settings(unsafe_every_participant_trusted="sure")


@pytest.mark.parametrize("spawner, ip, room", [("system-users", "127.0.0.1", True), ("shared-account", "127.0.0.1", False),
                                               ("shared-account", "0.0.0.0", True)])
def test_a_room_separates_learners_or_listens_beyond_loopback(spawner: str, ip: str, room: bool):
    assert HubSettings(ip=ip, spawner=spawner).is_room is room


def test_caddy_sends_the_front_proxys_secret_to_the_hubs_host_only():
    from labkit.workshop.auth import FRONT_PROXY_HEADER
    from labkit.workshop.front_proxy import caddyfile

    room = settings(caddy="yes", subdomain_host="https://hub.example.org")
    hub, _, learners = caddyfile(room, "s3cret").partition("*.hub.example.org:443 {")
    assert "hub.example.org:443 {" in hub and f"header_up {FRONT_PROXY_HEADER} s3cret" in hub
    assert f"header_up -{FRONT_PROXY_HEADER}" in learners and "s3cret" not in learners
    for site in (hub, learners):
        assert "tls internal" in site and "header_up X-Forwarded-For {remote_host}" in site
        assert "Strict-Transport-Security" in site and "reverse_proxy 127.0.0.1:8000" in site
    own = caddyfile(settings(caddy="yes", subdomain_host="https://hub.example.org", tls_certificate="/c.pem",
                             tls_key="/k.pem"), "s3cret")
    assert own.count("tls /c.pem /k.pem") == 2 and "tls internal" not in own


def test_caddy_forwards_only_the_cookies_the_rooms_pages_read_to_every_host():
    """A tossed cookie of another name, or of a size no page's cookie has, never reaches the hub's proxy (the bomb)."""
    import re

    from labkit.workshop.front_proxy import caddyfile, cookie_filter

    room = settings(caddy="yes", subdomain_host="https://hub.example.org")
    assert caddyfile(room, "s3cret").count(f'header_up Cookie "{cookie_filter()}" "$1;"') == 2  # the hub's host, the wildcard
    kept = ["__Host-jupyterhub-hub-login=2|1:0|10:1796328553|26:__Host-jupyterhub-hub-login|48:YWJj|" + "f" * 64,
            "_xsrf=MnxhYmN8ZGVm", "jupyterhub-session-id=" + "0123456789abcdef" * 2]
    bomb = ["bomb0=" + "x" * 3800, "_xsrf=" + "x" * 3800, "jupyterhub-session-id=" + "x" * 3800, "jupyterhub-hub-login=alice"]
    sent = "; ".join([bomb[0], kept[0], bomb[1], kept[1], bomb[2], kept[2], bomb[3]])
    forwarded = re.sub(cookie_filter(), r"\1;", sent)  # Python's re and Caddy's RE2 agree on this expression
    assert [part for part in forwarded.split(";") if part] == kept


def test_every_test_the_readmes_security_table_names_exists():
    """The README's sentence -> test table names real tests (a renamed test would leave a sentence unchecked)."""
    import ast
    import re

    readme = (Path(__file__).resolve().parents[2] / "workshop" / "README.md").read_text()
    named = re.findall(r"`(test_\w+\.py)::(test_\w+)`", readme)
    assert len(named) >= 7, named
    for module, name in named:
        tree = ast.parse((Path(__file__).parent / module).read_text())
        assert name in {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}, f"{module}::{name}"


@pytest.mark.parametrize("domain, message", [
    ("hub.example.org", "is the hub's host 'hub.example.org'"),
    ("example.org", "is a parent of the hub's host"),
    ("learners.hub.example.org", "is below the hub's host"),
    ("https://learners.example.net", "give a host name only"),
    ("learners.example.net:8443", "give a host name only"),
    ("localhost", "give a host name only"),
])
def test_a_learners_domain_apart_from_the_hubs_host_or_a_clear_refusal(domain: str, message: str):
    with pytest.raises(LabkitValueError, match=message):
        settings(subdomain_host="https://hub.example.org", learners_domain=domain)


def test_a_learners_domain_needs_the_hubs_own_url():
    with pytest.raises(LabkitValueError, match="LEARNERS_DOMAIN='learners.example.net' needs the hub's own URL: set "
                                               "LABKIT_WORKSHOP_SUBDOMAIN_HOST"):
        settings(learners_domain="learners.example.net")


def test_learners_on_their_own_domain_and_the_board_on_the_hubs():
    """JupyterHub's hook puts learner NAME at NAME.LEARNERS_DOMAIN (SUBDOMAIN_HOST's port), services under the hub's host."""
    from labkit.workshop.hosts import hub_host_settings, layout_warning, learner_origin, service_origin

    room = settings(subdomain_host="https://hub.localhost:8443", learners_domain="Learners.Localhost.")
    assert room.learners_domain == "learners.localhost" and room.isolated_origins
    assert learner_origin(room, "ada") == "https://ada.learners.localhost:8443"
    assert service_origin(room, "labkit-board") == "https://labkit-board--service.hub.localhost:8443"
    hub = hub_host_settings(room)
    assert (hub["public_url"], hub["subdomain_host"], hub["hub_routespec"]) == (
        "https://hub.localhost:8443/", "https://learners.localhost:8443", "hub.localhost/")
    hook = hub["subdomain_hook"]
    assert hook("ada", "hub.localhost", "user") == "ada.learners.localhost"  # JupyterHub passes the hub's domain here
    assert hook("labkit-board", "learners.localhost", "service") == "labkit-board--service.hub.localhost"  # ... and here
    assert layout_warning(room) == ""
    old = settings(subdomain_host="https://hub.localhost:8443")
    assert learner_origin(old, "ada") == "https://ada.hub.localhost:8443"
    assert hub_host_settings(old) == {"subdomain_host": "https://hub.localhost:8443", "hub_routespec": "hub.localhost/"}
    assert "below the hub's own host" in layout_warning(old) and "LABKIT_WORKSHOP_LEARNERS_DOMAIN" in layout_warning(old)
    shared = layout_warning(settings(subdomain_host="https://hub.example.org", learners_domain="learners.example.org"))
    assert "share the parent domain example.org" in shared and "registrable domain of their own" in shared
    assert layout_warning(settings(subdomain_host="https://hub.example.org", learners_domain="example-learners.net")) == ""
    assert hub_host_settings(settings()) == {} and layout_warning(settings()) == ""


def test_caddy_has_a_site_per_kind_of_host_and_the_hubs_pages_on_the_hubs_only():
    """With LEARNERS_DOMAIN: the hub's site (the secret), the board's and the learners' wildcard (each refusing /hub/)."""
    from labkit.workshop.auth import FRONT_PROXY_HEADER
    from labkit.workshop.front_proxy import NOT_THE_HUB, caddyfile

    room = settings(caddy="yes", subdomain_host="https://hub.example.org", learners_domain="learners.example.net")
    sites = [site for site in caddyfile(room, "s3cret").split("\n}\n")[1:] if site.strip()]  # [0]: the options
    names = [site.strip().split(" {")[0] for site in sites]
    assert names == ["hub.example.org:443", "labkit-board--service.hub.example.org:443", "*.learners.example.net:443"]
    hub, board, learners = sites[:3]
    assert f"header_up {FRONT_PROXY_HEADER} s3cret" in hub and "respond @hub" not in hub
    for site in (board, learners):
        assert "s3cret" not in site and f"header_up -{FRONT_PROXY_HEADER}" in site and "tls internal" in site
        assert "@hub path /hub /hub/*" in site
        assert f'respond @hub "{NOT_THE_HUB} https://hub.example.org/hub/" 404' in site
