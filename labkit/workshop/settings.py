"""What ``workshop/jupyterhub_config.py`` reads: the workshop's settings, checked before the hub starts.

Why here and not in the config file: the hub runs as root and trusts this
code, so it is type-checked and tested like the rest of labkit, and the config
file stays a list of JupyterHub settings an instructor can read.

Settings are environment variables (``LABKIT_WORKSHOP_*``, see
``workshop/README.md``), so ``make workshop TRACK=all`` and a systemd unit
set them the same way. Who runs each learner's server (``SPAWNER``):

- ``system-users`` (the default for a room: whenever the hub runs as root or
  listens beyond loopback): learner NAME's server runs as the Unix account
  ``labkit-NAME``, created on their first log-in (:mod:`labkit.workshop.accounts`),
  from the learner venv of ``labkit workshop install`` (:mod:`labkit.workshop.install`),
  which learners can read but not change. Each home is 0700.
- ``shared-account`` (a single trusted machine, and the tests): every server
  runs as the hub's own account, so code a learner runs can read and change
  every other workspace and the hub's state. It refuses to listen beyond
  loopback unless ``UNSAFE_SHARED_ACCOUNT_BEYOND_LOOPBACK=yes`` says the room
  is trusted.
"""
from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from labkit.core.errors import LabkitValueError
from labkit.i18n.messages import LANGUAGES, N_
from labkit.learner.tracks import TRACKS

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE_NAME = "labkit-workspace"
SPAWNERS = ("shared-account", "system-users")
PREFIX = "LABKIT_WORKSHOP_"
# The names a learner may sign up with: a lowercase letter, then up to 23 lowercase letters, digits, "-" or "_".
# No whitespace, no markup, nothing a page or a shell could misread; short enough that ACCOUNT_PREFIX + name
# is a valid Unix account name (32 characters at most).
USERNAME_PATTERN = r"^[a-z][a-z0-9_-]{0,23}$"
# the sign-up page shows it in the room's language (labkit/workshop/auth.py)
USERNAME_RULE = N_("a lowercase letter, then up to 23 lowercase letters, digits, '-' or '_'")
ACCOUNT_PREFIX = "labkit-"  # learner NAME's Unix account (system-users): never collides with a system account
ACCOUNT_PREFIX_PATTERN = r"^[a-z][a-z0-9-]{0,7}$"  # at most 8 characters: with a 24-character name, 32 in all
# LEARNERS_DOMAIN: two or more lowercase DNS labels, no scheme, port or trailing dot
DOMAIN_PATTERN = r"^(?=.{1,200}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
UNSAFE_SHARED = "UNSAFE_SHARED_ACCOUNT_BEYOND_LOOPBACK"  # the one way to put the shared account in a room
UNSAFE_SHARED_ROOT = "UNSAFE_SHARED_ACCOUNT_AS_ROOT"  # learners' kernels as root: the tests' machine only
UNSAFE_TRUSTED = "UNSAFE_EVERY_PARTICIPANT_TRUSTED"  # a room without a subdomain per server: nobody would attack
UNSAFE_CHECKOUT = "UNSAFE_READABLE_CHECKOUT"  # a room whose learners can read the checkout: the tests' machine only
LEARNER_PASSWORD_MIN = 8  # JupyterHub's own minimum for the shared learner password
INSTRUCTOR_PASSWORD_MIN = 12
SHARED_ADMIN_PASSWORD_MIN = 32  # JupyterHub's SharedPasswordAuthenticator refuses a shorter admin password


@dataclass(frozen=True)
class HubSettings:
    """The workshop's settings, read from ``LABKIT_WORKSHOP_*`` environment variables."""

    ip: str = "127.0.0.1"
    port: int = 8000
    track: str = "core"
    language: str = "en"  # the room's: every learner's LABKIT_LANG and workspace, and the board's (a learner may switch)
    admin: str = "instructor"
    spawner: str = "system-users"  # from_environment picks shared-account only for a non-root hub on loopback
    homes: Path = Path("/home")  # system-users: ACCOUNT_PREFIX + NAME here; shared-account: workshop/learners/NAME
    state: Path = ROOT / "workshop" / "state"  # the hub's database, cookie secret, proxy pid: 0700, the hub's only
    notebooks: Path = ROOT / "notebooks"  # the solved labs: in a room, the instructor's alone until hand-out
    install: Path = Path("/opt/labkit")  # system-users: the learner venv and the learner edition (read-only to learners)
    account_prefix: str = ACCOUNT_PREFIX
    unsafe_shared_account: bool = False  # shared-account beyond loopback: every learner can read every workspace
    subdomain_host: str = ""  # e.g. https://hub.example.org: each learner's server on a subdomain of its own
    learners_domain: str = ""  # e.g. learners.example.net: learner NAME at NAME.learners.example.net, off the hub's domain
    unsafe_shared_account_as_root: bool = False  # shared-account in a root hub: every learner's code runs as root
    unsafe_trusted: bool = False  # a room without subdomain_host: every learner's page runs on the hub's origin
    max_learners: int = 40  # shared-password log-in: how many names may log in with the room's password
    login_attempts_per_minute: int = 30  # log-in and sign-up POSTs per client address (a room behind one NAT: more)
    max_pending_sign_ups: int = 60  # sign-ups waiting for the instructor's approval at once
    proxies_in_front: int = 0  # reverse proxies before the hub's own (an HTTPS one: 1), for the client's address
    caddy: bool = False  # the hub starts Caddy in front, HTTPS for SUBDOMAIN_HOST and its wildcard (front_proxy.py)
    tls_certificate: str = ""  # Caddy's certificate and key files for both names; unset: Caddy's own local CA
    tls_key: str = ""
    unsafe_readable_checkout: bool = False  # learners may read the checkout (its solutions): for a test machine only
    mem_limit: str = "2G"
    threads: int = 2  # torch's threads per kernel: its default, one per core, oversubscribes a shared server
    cull_after_s: int = 3600
    kernel_cull_after_s: int = 1800  # a kernel left idle (the previous notebook's) is shut down, freeing its memory
    password: str = ""  # shared-password log-in when set, else NativeAuthenticator
    admin_password: str = ""
    board_port: int = 8090  # the room board service (labkit.workshop.board), on loopback behind the hub's proxy
    stuck_attempts: int = 3  # the board flags a learner whose same exercise is not solved after this many attempts
    stuck_minutes: int = 10  # ... or who did nothing labkit records for this long while others progress
    stuck_repeats: int = 2  # ... or whose latest verdicts named the same mistake this many times (board/stuck.py)
    stuck_slower: int = 2  # ... or who took this many times the room's median on her exercise (board/stuck.py)
    look_seconds: int = 1200  # the longest an instructor's look at a learner's server lasts (a help request's)

    @classmethod
    def from_environment(cls, env: dict[str, str] | None = None, euid: int | None = None) -> HubSettings:
        """The settings from ``env`` (default: this process's); ``euid`` is the hub's user id (default: this process's)."""
        env = dict(os.environ if env is None else env)
        euid = os.geteuid() if euid is None else euid
        defaults = cls()
        ip = env.get(PREFIX + "IP", defaults.ip)
        spawner = env.get(PREFIX + "SPAWNER") or ("system-users" if euid == 0 or not is_loopback(ip) else "shared-account")
        homes = defaults.homes if spawner == "system-users" else ROOT / "workshop" / "learners"

        def get(name: str, default: object) -> str:
            return env.get(PREFIX + name.upper(), str(default))

        settings = cls(
            ip=ip, port=_integer(PREFIX + "PORT", get("port", defaults.port)),
            track=get("track", defaults.track), language=get("language", defaults.language),
            admin=get("admin", defaults.admin),
            spawner=spawner, homes=Path(get("homes", homes)).resolve(),
            state=Path(get("state", defaults.state)).resolve(), notebooks=Path(get("notebooks", defaults.notebooks)).resolve(),
            install=Path(get("install", defaults.install)).resolve(), account_prefix=get("account_prefix", ACCOUNT_PREFIX),
            unsafe_shared_account=_yes(PREFIX + UNSAFE_SHARED, get(UNSAFE_SHARED.lower(), "no")),
            subdomain_host=get("subdomain_host", "").rstrip("/"),
            learners_domain=get("learners_domain", "").lower().rstrip("."),
            unsafe_shared_account_as_root=_yes(PREFIX + UNSAFE_SHARED_ROOT, get(UNSAFE_SHARED_ROOT.lower(), "no")),
            unsafe_trusted=_yes(PREFIX + UNSAFE_TRUSTED, get(UNSAFE_TRUSTED.lower(), "no")),
            max_learners=_integer(PREFIX + "MAX_LEARNERS", get("max_learners", defaults.max_learners)),
            login_attempts_per_minute=_integer(PREFIX + "LOGIN_ATTEMPTS_PER_MINUTE",
                                               get("login_attempts_per_minute", defaults.login_attempts_per_minute)),
            max_pending_sign_ups=_integer(PREFIX + "MAX_PENDING_SIGN_UPS",
                                          get("max_pending_sign_ups", defaults.max_pending_sign_ups)),
            proxies_in_front=_integer(PREFIX + "PROXIES_IN_FRONT", get("proxies_in_front", defaults.proxies_in_front)),
            caddy=_yes(PREFIX + "CADDY", get("caddy", "no")),
            tls_certificate=get("tls_certificate", ""), tls_key=get("tls_key", ""),
            unsafe_readable_checkout=_yes(PREFIX + UNSAFE_CHECKOUT, get(UNSAFE_CHECKOUT.lower(), "no")),
            mem_limit=get("mem_limit", defaults.mem_limit),
            threads=_integer(PREFIX + "THREADS", get("threads", defaults.threads)),
            cull_after_s=_integer(PREFIX + "CULL_AFTER_S", get("cull_after_s", defaults.cull_after_s)),
            kernel_cull_after_s=_integer(PREFIX + "KERNEL_CULL_AFTER_S",
                                         get("kernel_cull_after_s", defaults.kernel_cull_after_s)),
            password=get("password", ""), admin_password=get("admin_password", ""),
            board_port=_integer(PREFIX + "BOARD_PORT", get("board_port", defaults.board_port)),
            stuck_attempts=_integer(PREFIX + "STUCK_ATTEMPTS", get("stuck_attempts", defaults.stuck_attempts)),
            stuck_minutes=_integer(PREFIX + "STUCK_MINUTES", get("stuck_minutes", defaults.stuck_minutes)),
            stuck_repeats=_integer(PREFIX + "STUCK_REPEATS", get("stuck_repeats", defaults.stuck_repeats)),
            stuck_slower=_integer(PREFIX + "STUCK_SLOWER", get("stuck_slower", defaults.stuck_slower)),
            look_seconds=_integer(PREFIX + "LOOK_SECONDS", get("look_seconds", defaults.look_seconds)),
        )
        settings.validate(euid)
        return settings

    def validate(self, euid: int | None = None) -> None:
        """Refuse a setting the hub would misread, or one that gives the room away, before it starts."""
        euid = os.geteuid() if euid is None else euid
        if self.track not in TRACKS:
            raise LabkitValueError(f"{PREFIX}TRACK={self.track!r}: choose one of {', '.join(TRACKS)}.")
        if self.language not in LANGUAGES:
            raise LabkitValueError(f"{PREFIX}LANGUAGE={self.language!r}: the room's language is one of {', '.join(LANGUAGES)} "
                                   "(en English, zh Chinese, ru Russian); each learner may still switch her own kernel.")
        if self.spawner not in SPAWNERS:
            raise LabkitValueError(f"{PREFIX}SPAWNER={self.spawner!r}: choose one of {', '.join(SPAWNERS)}.")
        for name, value in (("THREADS", self.threads), ("CULL_AFTER_S", self.cull_after_s),
                            ("KERNEL_CULL_AFTER_S", self.kernel_cull_after_s), ("BOARD_PORT", self.board_port),
                            ("MAX_LEARNERS", self.max_learners), ("LOGIN_ATTEMPTS_PER_MINUTE", self.login_attempts_per_minute),
                            ("MAX_PENDING_SIGN_UPS", self.max_pending_sign_ups),
                            ("STUCK_ATTEMPTS", self.stuck_attempts), ("STUCK_MINUTES", self.stuck_minutes),
                            ("STUCK_REPEATS", self.stuck_repeats), ("STUCK_SLOWER", self.stuck_slower),
                            ("LOOK_SECONDS", self.look_seconds)):
            if value < 1:
                raise LabkitValueError(f"{PREFIX}{name}={value}: give a whole number of at least 1.")
        if self.proxies_in_front < 0:
            raise LabkitValueError(f"{PREFIX}PROXIES_IN_FRONT={self.proxies_in_front}: give 0, or how many reverse proxies "
                                   "stand before the hub (an HTTPS proxy in front: 1).")
        if self.board_port > 65535 or self.board_port == self.port:
            raise LabkitValueError(f"{PREFIX}BOARD_PORT={self.board_port}: give a free port other than the hub's ({self.port}).")
        if not re.fullmatch(USERNAME_PATTERN, self.admin):
            raise LabkitValueError(f"{PREFIX}ADMIN={self.admin!r}: an account name is {USERNAME_RULE}.")
        if not re.fullmatch(ACCOUNT_PREFIX_PATTERN, self.account_prefix):
            raise LabkitValueError(f"{PREFIX}ACCOUNT_PREFIX={self.account_prefix!r}: give a lowercase letter, then up to "
                                   "7 lowercase letters, digits or '-' (the default is labkit-).")
        self._validate_separation(euid)
        self._validate_passwords()
        self._validate_subdomain_host()

    def _validate_subdomain_host(self) -> None:
        if self.caddy and not self.subdomain_host.startswith("https://"):
            raise LabkitValueError(f"{PREFIX}CADDY=yes serves the room over HTTPS at {PREFIX}SUBDOMAIN_HOST: set it, e.g. "
                                   f"{PREFIX}SUBDOMAIN_HOST=https://hub.example.org.")
        if bool(self.tls_certificate) != bool(self.tls_key):
            raise LabkitValueError(f"Set both {PREFIX}TLS_CERTIFICATE and {PREFIX}TLS_KEY (one certificate for the hub's "
                                   f"name, its wildcard and, with {PREFIX}LEARNERS_DOMAIN, the learners' wildcard), or "
                                   "neither (Caddy's own local CA).")
        if not self.subdomain_host:
            if self.learners_domain:
                raise LabkitValueError(f"{PREFIX}LEARNERS_DOMAIN={self.learners_domain!r} needs the hub's own URL: set "
                                       f"{PREFIX}SUBDOMAIN_HOST too, e.g. {PREFIX}SUBDOMAIN_HOST=https://hub.example.org.")
            return
        parts = urlsplit(self.subdomain_host)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query or parts.fragment:
            raise LabkitValueError(
                f"{PREFIX}SUBDOMAIN_HOST={self.subdomain_host!r}: give a scheme and a host name only, e.g. "
                "https://hub.example.org (learner NAME's server is then https://NAME.hub.example.org)."
            )
        if parts.scheme == "http" and not (parts.hostname == "localhost" or parts.hostname.endswith(".localhost")):
            raise LabkitValueError(
                f"{PREFIX}SUBDOMAIN_HOST={self.subdomain_host!r}: a room's servers need https:// (passwords and cookies "
                "would cross the room's network in the clear); http:// is for NAME.localhost names on this machine only."
            )
        self._validate_learners_domain(parts.hostname)

    def _validate_learners_domain(self, hub: str) -> None:
        """The learners' domain is a host name apart from the hub's: not its host, nor a parent or a child of it."""
        domain = self.learners_domain
        if not domain:
            return
        name = f"{PREFIX}LEARNERS_DOMAIN={domain!r}"
        if not re.fullmatch(DOMAIN_PATTERN, domain):
            raise LabkitValueError(f"{name}: give a host name only, no scheme or port, e.g. learners.example.net "
                                   "(learner NAME's server is then at NAME.learners.example.net, on SUBDOMAIN_HOST's port).")
        if domain == hub or hub.endswith("." + domain) or domain.endswith("." + hub):
            relation = "is" if domain == hub else "is a parent of" if hub.endswith("." + domain) else "is below"
            raise LabkitValueError(f"{name} {relation} the hub's host {hub!r}: a learner's page could then set the hub's "
                                   "cookies. Give a domain beside it, e.g. learners.example.net for hub.example.org, "
                                   "best a registrable domain of its own.")

    def _validate_separation(self, euid: int) -> None:
        if self.spawner == "system-users" and euid != 0:
            raise LabkitValueError(
                f"{PREFIX}SPAWNER=system-users runs each learner's server as their own Unix account, which only a hub "
                "running as root can do: start it as root (sudo make workshop), or, on a trusted machine only, "
                f"set {PREFIX}SPAWNER=shared-account."
            )
        if self.spawner == "shared-account" and not is_loopback(self.ip) and not self.unsafe_shared_account:
            raise LabkitValueError(
                f"{PREFIX}SPAWNER=shared-account with {PREFIX}IP={self.ip}: every learner's code would run as one account "
                "and could read every workspace and the hub's secrets, so it listens on loopback only. Run the hub as "
                f"root for a room (system-users), or, if you trust every learner, set {PREFIX}{UNSAFE_SHARED}=yes."
            )

    def _validate_passwords(self) -> None:
        if bool(self.password) != bool(self.admin_password):
            raise LabkitValueError(
                f"Set both {PREFIX}PASSWORD (learners) and {PREFIX}ADMIN_PASSWORD (the instructor, "
                f"{SHARED_ADMIN_PASSWORD_MIN}+ characters), or neither (learners then sign up and the instructor approves them)."
            )
        if self.password and len(self.password) < LEARNER_PASSWORD_MIN:
            raise LabkitValueError(f"{PREFIX}PASSWORD is {len(self.password)} characters: give at least {LEARNER_PASSWORD_MIN}.")
        if self.admin_password and len(self.admin_password) < SHARED_ADMIN_PASSWORD_MIN:
            raise LabkitValueError(
                f"{PREFIX}ADMIN_PASSWORD is {len(self.admin_password)} characters: JupyterHub asks for at least "
                f"{SHARED_ADMIN_PASSWORD_MIN} (e.g. python -c 'import secrets; print(secrets.token_urlsafe(24))')."
            )
        if self.password and self.password == self.admin_password:
            raise LabkitValueError(f"{PREFIX}ADMIN_PASSWORD must differ from {PREFIX}PASSWORD, which every learner knows.")

    @property
    def instructor_scopes(self) -> list[str]:
        """What the instructor may do: JupyterHub's admin page and users, and no standing ``access:servers``.

        A learner's server serves the learner's code, and is the learner's: the instructor opens one only
        while its learner asks for help with a look (``labkit.help("2.3", share=True)``), which shares that
        server with the hub group ``instructors`` until the request ends (:mod:`labkit.workshop.board.queue`).
        """
        return ["admin-ui", "admin:users", "admin:servers", "list:users", "read:users"]

    @property
    def is_room(self) -> bool:
        """Whether this hub is a room of people who may attack it: learners as their own accounts, or beyond loopback."""
        return self.separated or not is_loopback(self.ip)

    @property
    def isolated_origins(self) -> bool:
        """Whether each learner's server has an origin of its own (a subdomain), apart from the hub's and each other's."""
        return bool(self.subdomain_host)

    @property
    def host_only_cookies(self) -> bool:
        """Whether the hub's and the board's log-in cookies are ``__Host-`` (HTTPS only): no learner's host can toss them."""
        return self.subdomain_host.startswith("https://")

    @property
    def separated(self) -> bool:
        """Whether each learner's code runs as their own account (a room), not as the hub's."""
        return self.spawner == "system-users"

    def account(self, username: str) -> str:
        """The Unix account of learner ``username`` (system-users)."""
        return self.account_prefix + username

    def home(self, username: str) -> Path:
        """The home folder of learner ``username``: their account's (system-users), or their folder in ``homes``."""
        return self.homes / (self.account(username) if self.separated else username)

    def workspace(self, username: str) -> Path:
        """Where learner ``username`` works: the root folder of their server."""
        return self.home(username) / WORKSPACE_NAME

    @property
    def learner_python(self) -> Path:
        """The interpreter learners' servers and kernels run (system-users: the installed learner venv)."""
        return self.install / "venv" / "bin" / "python"

    @property
    def board_state(self) -> Path:
        """The board's folder in the hub's state: its database and cookie secret (0700, the hub's account's)."""
        return self.state / "board"

    @property
    def edition(self) -> Path:
        """The learner edition of this track that every workspace is made from (system-users)."""
        return self.install / "edition" / self.track


def is_loopback(ip: str) -> bool:
    """Whether a hub listening on ``ip`` is reachable from this machine only ("" and 0.0.0.0 mean every address)."""
    if ip == "localhost":
        return True
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False


def _yes(name: str, text: str) -> bool:
    if text.lower() in ("yes", "no", ""):
        return text.lower() == "yes"
    raise LabkitValueError(f"{name}={text!r}: give yes or no.")


def _integer(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise LabkitValueError(f"{name}={text!r}: give a whole number.") from None
