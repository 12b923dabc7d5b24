"""The workshop's log-in: NativeAuthenticator's sign-up and approval, with the holes an attacker found closed.

Why a subclass: anyone who reaches the hub may sign up, and every sign-up ends
up on the instructor's screen at ``/hub/authorize``, in the browser that holds
the hub's admin cookie. jupyterhub-nativeauthenticator 1.3.0 (the release
``pyproject.toml`` allows) has these upstream bugs, each shown by an attack
from loopback with the workshop's default settings:

- **Stored XSS through an unquoted attribute**: its
  ``templates/authorization-area.html`` writes each name into an unquoted
  attribute (``<tr id={{ user.username }}>``), and its sign-up refuses only
  names with ``,``, `` `` or ``/``. Jinja's escaping does not help an
  unquoted attribute: a name with tabs (``u<TAB>tabindex=1<TAB>autofocus
  <TAB>onfocus=...``) adds attributes, so opening ``/hub/authorize`` runs the
  sign-up's script as the instructor, which can mint an admin API token.
- **State changes on GET**: ``GET /hub/authorize/NAME`` toggles a sign-up's
  approval and ``GET /hub/discard/NAME`` deletes it. JupyterHub checks its XSRF
  token only on POST (and skips it for a same-origin image), so a markdown
  image ``![](/hub/authorize/NAME)`` in a learner's notebook approves that
  sign-up when the instructor opens the learner's server.
- **No password minimum**: ``minimum_password_length`` defaults to 0; a
  1-character instructor password is accepted.
- With bcrypt 5 a password over 72 bytes raises in ``bcrypt.hashpw``: a
  sign-up with one got a 500, not a message.

What :class:`WorkshopAuthenticator` does instead:

- A name must match :data:`labkit.workshop.settings.USERNAME_PATTERN` in full
  (after JupyterHub lowercases it); the sign-up page says
  :data:`~labkit.workshop.settings.USERNAME_RULE` when it does not.
- Approve, withdraw an approval and discard are POST only, from forms that
  carry JupyterHub's XSRF token: JupyterHub's ``BaseHandler.prepare`` answers a
  cookie-authenticated POST without it with 403, and a GET gets 405. Admins
  only, as before.
- Every page of NativeAuthenticator that shows a name is labkit's own copy
  (``labkit/workshop/templates/``): every attribute quoted, names escaped (and
  URL-encoded in a URL), buttons instead of links. NativeAuthenticator adds
  its own template folder *after* JupyterHub's to the hub's shared jinja
  environment (in ``LocalBase.__init__``, on its first page); labkit's pages
  render through an overlay of that environment that looks in labkit's folder
  first, so whatever NativeAuthenticator's own templates do, none of them is
  used, and no page of JupyterHub's own changes.
- Passwords: learners at least :data:`LEARNER_MINIMUM` characters, the
  instructor (``admin_users``) at least :data:`ADMIN_MINIMUM`, none from
  NativeAuthenticator's list of common passwords, at most
  :data:`BCRYPT_MAX_BYTES` bytes; refused at sign-up and on every password
  change, with a message that says which rule.
- ``/hub/confirm/`` (self-approval by e-mail) is not served: the instructor
  approves each sign-up.
- Log-in and sign-up cannot stall the hub: bcrypt (about a quarter of a
  second of CPU per password) runs on a small pool of threads of its own,
  never on the hub's event loop, on every path: the check, a refused log-in
  (NativeAuthenticator's page hashed the password again on the loop to tell
  "not approved yet" apart), the sign-up's hash and both password changes. A
  name nobody signed up with is checked against :data:`DUMMY_HASH`, so it costs
  one bcrypt like a real name and the answer's timing says nothing about
  which names exist. Each client address may POST to ``/hub/login``
  and ``/hub/signup`` at most ``attempts_per_minute`` times a minute (429 and
  how long to wait, after that); and at most ``max_pending_sign_ups`` sign-ups
  wait for approval at once (the next is refused, saying so), so the
  instructor's approval page stays a page.
- The instructor's name is nobody's to take first: NativeAuthenticator approves
  an admin name at once, so whoever reached the sign-up page first became the
  instructor. Signing up under an instructor's name needs ``instructor_code``,
  which the hub writes into its private state folder and prints on its own
  console when it starts (:func:`labkit.workshop.room.instructor_sign_up_code`);
  with no code configured, nobody may sign up under that name.
- ``instructors``: names approved at sign-up and held to the instructor's
  password rule like ``admin_users``, without being JupyterHub admins. The
  room's hub gives them a role of its own (``workshop/jupyterhub_config.py``)
  without ``access:servers`` unless learners' servers are on subdomains: a
  learner's server is the learner's code, and on the hub's origin a script
  it serves to the instructor's browser could act as the instructor.
"""
from __future__ import annotations

import asyncio
import hmac
import os
import re
import time
import weakref
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import bcrypt
from jinja2 import ChoiceLoader, Environment, FileSystemLoader, Template
from jupyterhub import orm
from jupyterhub.authenticators.shared import SharedPasswordAuthenticator
from jupyterhub.handlers import BaseHandler
from jupyterhub.scopes import needs_scope
from nativeauthenticator import NativeAuthenticator
from nativeauthenticator.handlers import (
    AuthorizationAreaHandler,
    ChangePasswordAdminHandler,
    ChangePasswordHandler,
    LoginHandler,
    SignUpHandler,
)
from nativeauthenticator.orm import UserInfo
from tornado import web
from tornado.escape import url_escape
from tornado.httputil import url_concat
from traitlets import Bool, Integer, Set, Unicode

from labkit.i18n.messages import N_, SOURCE_LANGUAGE, translation
from labkit.workshop.peers import peer_uid
from labkit.workshop.settings import (
    INSTRUCTOR_PASSWORD_MIN,
    LEARNER_PASSWORD_MIN,
    USERNAME_PATTERN,
    USERNAME_RULE,
    HubSettings,
)

TEMPLATES = Path(__file__).resolve().parent / "templates"
LEARNER_MINIMUM = LEARNER_PASSWORD_MIN
ADMIN_MINIMUM = INSTRUCTOR_PASSWORD_MIN  # the instructor's account opens every learner's server
BCRYPT_MAX_BYTES = 72  # bcrypt 5 refuses a longer password (older releases silently ignored the rest)
ATTEMPTS_PER_MINUTE = HubSettings.login_attempts_per_minute  # per client address (LABKIT_WORKSHOP_*: settings.py)
MAX_PENDING_SIGN_UPS = HubSettings.max_pending_sign_ups  # a room's worth, never an endless approval page
# A name nobody signed up with is checked against this hash (of a random password, at bcrypt.gensalt()'s cost),
# so that it costs one bcrypt, as an existing name does: the reply's timing does not tell which names exist.
DUMMY_HASH = b"$2b$12$M7lzostAuLkujfRha8SN1evrSf.0L9WgX6FPXHBe8F/k1D8fi6kke"
FRONT_PROXY_HEADER = "X-Labkit-Front-Proxy"  # the HTTPS proxy's proof (labkit.workshop.room.front_proxy_secret)
HASHING_THREADS = 2  # bcrypt releases the GIL: two threads hash while the event loop keeps serving
admin_only = needs_scope("admin:users")  # as NativeAuthenticator guards its admin pages
_hashing = ThreadPoolExecutor(HASHING_THREADS, thread_name_prefix="labkit-bcrypt")


async def off_the_loop(function: Any, *args: Any) -> Any:
    """``function(*args)`` on the hashing threads: bcrypt never blocks the hub's event loop."""
    return await asyncio.get_running_loop().run_in_executor(_hashing, function, *args)


class AttemptLimit:
    """At most ``per_minute`` attempts per client address in any 60 s; remembers at most ``addresses`` addresses."""

    WINDOW_S = 60.0

    def __init__(self, per_minute: int, addresses: int = 10_000) -> None:
        self.per_minute, self.addresses = per_minute, addresses
        self._seen: dict[str, deque[float]] = {}

    def wait_s(self, address: str, now: float | None = None) -> float:
        """0 and the attempt counted, or how many seconds ``address`` must wait before its next attempt."""
        now = time.monotonic() if now is None else now
        times = self._seen.setdefault(address, deque())
        while times and now - times[0] >= self.WINDOW_S:
            times.popleft()
        if len(times) >= self.per_minute:
            return self.WINDOW_S - (now - times[0])
        times.append(now)
        if len(self._seen) > self.addresses:  # forget the addresses idle longest: a flood of addresses stays bounded
            for stale in [key for key, seen in self._seen.items() if not seen or now - seen[-1] >= self.WINDOW_S]:
                del self._seen[stale]
            while len(self._seen) > self.addresses:
                del self._seen[next(iter(self._seen))]
        return 0.0

    @staticmethod
    def message(wait_s: float) -> str:
        return (f"Too many log-in and sign-up attempts from your address: wait {max(1, round(wait_s))} s and try "
                "again. (Sharing one address with the whole room? Ask the instructor.)")


def _peer(request: Any, local: bool = False) -> tuple[str, int] | None:
    """The address and port at the other end of ``request``'s connection (``local``: this end), or None if unknown."""
    sock: Any = getattr(getattr(getattr(request, "connection", None), "stream", None), "socket", None)
    try:
        address = sock.getsockname() if local else sock.getpeername()
    except (AttributeError, OSError):
        return None
    return str(address[0]), int(address[1])


_overlays: weakref.WeakKeyDictionary[Environment, dict[str, Environment]] = weakref.WeakKeyDictionary()


def templates_first(environment: Environment, language: str = SOURCE_LANGUAGE) -> Environment:
    """The hub's jinja ``environment``, looking in labkit's templates first, their words (``_()``) in the room's
    ``language`` (an overlay per language: the hub's own environment, its globals included, is unchanged)."""
    overlays = _overlays.setdefault(environment, {})
    overlay = overlays.get(language)
    if overlay is None:
        loader = ChoiceLoader([FileSystemLoader(str(TEMPLATES)), environment.loader])  # type: ignore[list-item]
        overlay = environment.overlay(loader=loader)
        overlay.globals = dict(environment.globals)  # an overlay shares the hub's dict: labkit's gettext goes in a copy
        overlay.add_extension("jinja2.ext.i18n")
        words = translation(language)
        overlay.install_gettext_callables(words.gettext, words.ngettext, newstyle=True)  # type: ignore[attr-defined]
        overlays[language] = overlay
    return overlay


class WorkshopAuthenticator(NativeAuthenticator):
    """NativeAuthenticator with labkit's names, passwords, templates, and approval by POST only."""

    minimum_password_length = Integer(LEARNER_MINIMUM, config=True, help="The shortest password a learner may choose.")
    admin_minimum_password_length = Integer(
        ADMIN_MINIMUM, config=True, help="The shortest password an admin (the instructor) may choose."
    )
    check_common_password = Bool(True, config=True, help="Refuse a password from NativeAuthenticator's common list.")
    instructor_code = Unicode("", config=True, help="What signing up under an instructor's name asks for.")
    instructors = Set(Unicode(), config=True, help="Names approved at sign-up, with the instructor's password rule.")
    attempts_per_minute = Integer(ATTEMPTS_PER_MINUTE, config=True, help="Log-in and sign-up POSTs per client address.")
    proxies_in_front = Integer(0, config=True, help="Reverse proxies before the hub's own, each adding X-Forwarded-For.")
    front_proxy_secret = Unicode("", config=True, help=f"What the proxy in front sends in {FRONT_PROXY_HEADER}.")
    max_pending_sign_ups = Integer(MAX_PENDING_SIGN_UPS, config=True, help="Sign-ups waiting for approval at most.")
    language = Unicode(SOURCE_LANGUAGE, config=True, help="The room's language: the words of the log-in pages.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.attempts = AttemptLimit(self.attempts_per_minute)
        self._hashed: dict[tuple[str, str], bytes] = {}  # (name, password) -> its bcrypt hash, made off the loop

    async def authenticate(self, handler: Any, data: dict[str, str]) -> str | None:
        """NativeAuthenticator's check: one bcrypt on the hashing threads, for a name that exists or not.

        A right password of a sign-up not approved yet marks ``handler.unapproved``, for the log-in page to say so.
        """
        username = self.normalize_username(data["username"])
        user = self.get_user(username)
        if not await self.password_matches(user, data["password"]) or user is None:
            return None
        if not user.is_authorized:
            if handler is not None:
                handler.unapproved = True
            return None
        if user.has_2fa and not user.is_valid_token(data.get("2fa")):
            return None
        return str(username)

    async def password_matches(self, user: UserInfo | None, password: str) -> bool:
        """Whether ``password`` is ``user``'s, on the hashing threads; no user costs the same (:data:`DUMMY_HASH`)."""
        encoded = password.encode()
        if len(encoded) > BCRYPT_MAX_BYTES:  # bcrypt 5 raises; no such password was ever stored
            return False
        stored = DUMMY_HASH if user is None else bytes(user.password)
        return bool(await off_the_loop(bcrypt.checkpw, encoded, stored)) and user is not None

    async def set_password(self, username: str, new_password: str) -> bool:
        """Store ``new_password`` for ``username``, hashed on the hashing threads; False if labkit refuses it or no such user."""
        user = self.get_user(username)
        if user is None or self.password_problem(username, new_password):
            return False
        hashed = await off_the_loop(bcrypt.hashpw, new_password.encode(), bcrypt.gensalt())
        user.password = hashed
        self.db.commit()
        return True

    async def hash_for_sign_up(self, username: str, password: str) -> None:
        """Hash the sign-up's password on the hashing threads, for :meth:`create_user` to store."""
        encoded = password.encode()
        if 0 < len(encoded) <= BCRYPT_MAX_BYTES:
            hashed = await off_the_loop(bcrypt.hashpw, encoded, bcrypt.gensalt())
            self._hashed[(self.normalize_username(username), password)] = hashed

    def client_address(self, request: Any) -> str:
        """The address a request came from, as far as the hub can be sure of it (what the limit per address counts).

        X-Forwarded-For is read only from the hub's own proxy, a connection of
        the hub's own account (:meth:`from_the_hubs_proxy`): a learner's code
        that reaches the hub's port is another account, and counts as the
        address it connected from. The proxy appends the address it was
        reached from, so the last entry is true. The ``proxies_in_front``
        entries before it are read only when the request carries the front
        proxy's secret (``front_proxy_secret``, in :data:`FRONT_PROXY_HEADER`):
        a learner's code reaches the hub's proxy on loopback just as the front
        proxy does, and may send any X-Forwarded-For. (Not ``request.remote_ip``:
        JupyterHub's tornado sets it from X-Forwarded-For and X-Real-Ip.)
        """
        peer = _peer(request)
        chain = [entry.strip() for entry in request.headers.get("X-Forwarded-For", "").split(",") if entry.strip()]
        if peer is None or not chain or not self.from_the_hubs_proxy(request):
            return peer[0] if peer else ""
        proof = request.headers.get(FRONT_PROXY_HEADER, "")
        if (self.proxies_in_front and self.front_proxy_secret and len(chain) > self.proxies_in_front
                and hmac.compare_digest(proof.encode(), self.front_proxy_secret.encode())):
            return str(chain[-1 - self.proxies_in_front])
        return str(chain[-1])

    def from_the_hubs_proxy(self, request: Any) -> bool:
        """Whether ``request`` came on a connection the hub's own account made (its proxy), not a learner's code."""
        peer, local = _peer(request), _peer(request, local=True)
        return peer is not None and local is not None and peer_uid(peer, local) == os.geteuid()

    def pending_problem(self, username: str) -> str | None:
        """Why one more sign-up cannot wait for approval now, or None."""
        if self.is_instructor(username) or self.get_unauthed_amount() < self.max_pending_sign_ups:
            return None
        return (f"{self.max_pending_sign_ups} sign-ups are already waiting for the instructor's approval: ask the "
                "instructor to approve or discard them, then sign up again.")

    def is_instructor(self, username: str) -> bool:
        return self.normalize_username(username) in self.admin_users | self.instructors

    def get_authed_users(self) -> set[str]:
        """NativeAuthenticator's pre-approved names (approved at sign-up), and the instructors."""
        return set(super().get_authed_users()) | self.instructors

    def validate_username(self, username: str) -> bool:
        """JupyterHub's checks, and the whole name by labkit's rule (``re.fullmatch``: ``$`` also matches before a newline)."""
        return bool(re.fullmatch(USERNAME_PATTERN, username)) and bool(super().validate_username(username))

    def username_problem(self, username: str) -> str | None:
        """What is wrong with the name someone signs up with, or None."""
        if self.validate_username(self.normalize_username(username)):
            return None
        return f"That username is not allowed: a username is {USERNAME_RULE}."

    def password_problem(self, username: str, password: str) -> str | None:
        """What is wrong with ``password`` for account ``username``, or None."""
        admin = self.is_instructor(username)
        minimum = self.admin_minimum_password_length if admin else self.minimum_password_length
        if len(password) < minimum:
            whose = "the instructor's account" if admin else "a learner's account"
            return f"Choose a longer password: {whose} needs at least {minimum} characters."
        if len(password.encode()) > BCRYPT_MAX_BYTES:
            return f"Choose a shorter password: at most {BCRYPT_MAX_BYTES} bytes (as many plain letters, fewer accented ones)."
        if self.check_common_password and self.is_password_common(password):
            return "That password is on the list of common passwords: choose another."
        return None

    def instructor_code_problem(self, username: str, code: str) -> str | None:
        """Why a sign-up under ``username`` with sign-up code ``code`` is refused, or None."""
        if not self.is_instructor(username):
            return None
        if not self.instructor_code:
            return "That name is the instructor's, and this hub has no instructor's sign-up code: nobody may sign up with it."
        if hmac.compare_digest(code.strip().encode(), self.instructor_code.encode()):
            return None
        return ("That name is the instructor's: signing up with it needs the instructor's sign-up code, which the hub "
                "printed when it started.")

    def create_user(self, username: str, password: str, **kwargs: Any) -> Any:
        """NativeAuthenticator's sign-up, refusing (None) a name or a password labkit does not allow."""
        hashed = self._hashed.pop((self.normalize_username(username), password), None)
        if self.username_problem(username) or self.password_problem(username, password):
            return None
        username = self.normalize_username(username)
        if self.user_exists(username) or not self.enable_signup:
            return None
        # NativeAuthenticator's own create_user, less its self-approval e-mail (``/hub/confirm/`` is not served),
        # storing the hash the sign-up page made off the loop (hashed here only for a caller other than that page).
        infos = {**kwargs, "username": username,
                 "password": hashed or bcrypt.hashpw(password.encode(), bcrypt.gensalt())}
        if self.open_signup or username in self.get_authed_users():
            infos["is_authorized"] = True
        try:
            info = UserInfo(**infos)
        except AssertionError:  # NativeAuthenticator's check of the e-mail address
            return None
        self.db.add(info)
        self.db.commit()
        return info

    def change_password(self, username: str, new_password: str) -> bool | None:
        """NativeAuthenticator's password change, refusing (None) a password labkit does not allow."""
        if self.password_problem(username, new_password):
            return None
        return super().change_password(username, new_password)

    def get_handlers(self, app: Any) -> list[tuple[str, type[BaseHandler]]]:
        """NativeAuthenticator's pages on labkit's templates; approve and discard by POST; no ``/confirm/``."""
        return [
            (r"/login", LogIn),
            (r"/signup", SignUp),
            (r"/authorize", AuthorizationArea),
            (r"/authorize/([^/]+)", ToggleApproval),
            (r"/discard/([^/]+)", Discard),
            (r"/change-password", ChangePassword),
            (r"/change-password/([^/]+)", ChangePasswordAdmin),
        ]


class RoomPasswordAuthenticator(SharedPasswordAuthenticator):
    """JupyterHub's shared-password log-in for at most ``max_learners`` learners.

    Why: with the room's password anyone may log in under any new name, and
    each new name is a Unix account and a server with its memory; the cap
    bounds what the password gives away. Names that already logged in keep
    logging in; the instructor (an admin) is never counted or refused.
    """

    max_learners = Integer(40, config=True, help="How many learners may log in with the shared password, at most.")

    async def authenticate(self, handler: Any, data: dict[str, str]) -> dict[str, Any] | None:
        result: dict[str, Any] | None = await super().authenticate(handler, data)
        if result is None or result.get("admin") or handler.find_user(result["name"]) is not None:
            return result
        learners = handler.db.query(orm.User).filter(orm.User.admin.is_(False)).count()
        if learners >= self.max_learners:
            raise web.HTTPError(403, f"The room is full: {learners} learners have logged in, the most this room takes "
                                "(LABKIT_WORKSHOP_MAX_LEARNERS). Log in under the name you used before, or ask the instructor.")
        return result


class _LabkitTemplates(BaseHandler):
    """Renders labkit's copy of a template where there is one (see :func:`templates_first`)."""

    def get_template(self, name: str, sync: bool = False) -> Template:
        language = getattr(self.authenticator, "language", SOURCE_LANGUAGE)
        return templates_first(self.settings["jinja2_env_sync" if sync else "jinja2_env"], language).get_template(name)

    async def refuse(self, template: str, message: str, **namespace: Any) -> None:
        """Show ``template`` again with ``message`` as its error, nothing changed."""
        self.finish(await self.render_template(template, result_message=message, alert="alert-danger", **namespace))


class LogIn(_LabkitTemplates, LoginHandler):
    """``/hub/login`` on labkit's ``native-login.html``; too many attempts from one address get 429 and a wait.

    NativeAuthenticator's own ``post`` checked a refused password again, on the event loop, to tell a sign-up
    not approved yet; here :meth:`WorkshopAuthenticator.authenticate` says so from its one check.
    """

    unapproved = False  # set by the authenticator: the right password of a sign-up not approved yet

    def _render(self, login_error: str | None = None, username: str | None = None, **kwargs: Any) -> Any:
        """The log-in page; JupyterHub 5 also renders it for an error (a failed XSRF check) with ``sync=True`` and the
        error page's fields, which NativeAuthenticator's ``_render`` does not take (the page was an error 500)."""
        return self.render_template(
            "native-login.html",
            next=url_escape(self.get_argument("next", default="")),
            username=username,
            login_error=login_error,
            custom_html=self.authenticator.custom_html,
            login_url=self.settings["login_url"],
            enable_signup=self.authenticator.enable_signup,
            two_factor_auth=self.authenticator.allow_2fa,
            authenticator_login_url=url_concat(self.authenticator.login_url(self.hub.base_url),
                                               {"next": self.get_argument("next", "")}),
            **kwargs,
        )

    async def post(self) -> None:
        username = self.get_body_argument("username", "")
        wait_s = self.authenticator.attempts.wait_s(self.authenticator.client_address(self.request))
        if wait_s:
            self.set_status(429)
            self.finish(await self._render(login_error=AttemptLimit.message(wait_s), username=username[:32]))
            return
        user = await self.login_user({argument: self.get_argument(argument, strip=False)
                                      for argument in self.request.arguments})
        if user:
            self._jupyterhub_user = user
            self.redirect(self.get_next_url(user))
            return
        say = translation(getattr(self.authenticator, "language", SOURCE_LANGUAGE)).gettext
        error = (say(N_("User {username} has not been authorized by an administrator yet.")).format(username=username)
                 if self.unapproved else say(N_("Invalid username or password.")))
        self.finish(await self._render(login_error=error, username=username))


class SignUp(_LabkitTemplates, SignUpHandler):
    """``/hub/signup`` on labkit's ``signup.html``, saying which rule a refused name or password broke."""

    @property
    def template_namespace(self) -> dict[str, Any]:
        language = getattr(self.authenticator, "language", SOURCE_LANGUAGE)
        return {**super().template_namespace, "username_rule": translation(language).gettext(USERNAME_RULE)}

    async def post(self) -> None:
        authenticator = self.authenticator
        username = self.get_body_argument("username", "", strip=False)
        password = self.get_body_argument("signup_password", "", strip=False)
        wait_s = authenticator.attempts.wait_s(authenticator.client_address(self.request))
        if wait_s:
            self.set_status(429)
        problem = ((AttemptLimit.message(wait_s) if wait_s else None)
                   or authenticator.instructor_code_problem(username,
                                                            self.get_body_argument("instructor_code", "", strip=False))
                   or authenticator.pending_problem(username))
        if problem is None:
            if authenticator.username_problem(username) is None and authenticator.password_problem(username, password) is None:
                await authenticator.hash_for_sign_up(username, password)
            try:
                await super().post()
            finally:
                authenticator._hashed.pop((authenticator.normalize_username(username), password), None)
            return
        await self.refuse("signup.html", problem, ask_email=authenticator.ask_email_on_signup,
                          two_factor_auth=authenticator.allow_2fa, recaptcha_key=authenticator.recaptcha_key,
                          tos=authenticator.tos)

    def get_result_message(self, user: Any, assume_user_is_human: bool, username_already_taken: bool,
                           confirmation_matches: bool, user_is_admin: bool) -> tuple[str, str]:
        username = self.get_body_argument("username", "", strip=False)
        user_is_admin = user_is_admin or self.authenticator.is_instructor(username)  # "successful", not "sent to the admin"
        alert, message = super().get_result_message(user, assume_user_is_human, username_already_taken,
                                                    confirmation_matches, user_is_admin)
        if user is None and assume_user_is_human and not username_already_taken and confirmation_matches:
            username = self.get_body_argument("username", strip=False)
            message = (self.authenticator.username_problem(username)
                       or self.authenticator.password_problem(username, self.get_body_argument("signup_password", strip=False))
                       or message)
        return alert, message


class AuthorizationArea(_LabkitTemplates, AuthorizationAreaHandler):
    """``/hub/authorize`` on labkit's ``authorization-area.html``: names quoted, a POST form per button."""


class ToggleApproval(BaseHandler):
    """``POST /hub/authorize/NAME`` approves a sign-up, or withdraws its approval; a GET is refused (405)."""

    @admin_only
    async def post(self, name: str) -> None:
        if UserInfo.find(self.db, name) is None:
            raise web.HTTPError(404, "no such sign-up")
        UserInfo.change_authorization(self.db, name)
        self.redirect(f"{self.hub.base_url}authorize#{quote(name, safe='')}")


class Discard(BaseHandler):
    """``POST /hub/discard/NAME`` deletes a sign-up that is not approved (as NativeAuthenticator's GET did); a GET is refused."""

    @admin_only
    async def post(self, name: str) -> None:
        info = UserInfo.find(self.db, name)
        if info is not None and not info.is_authorized:  # an approved account is removed at /hub/admin
            self.db.delete(info)
            self.db.commit()
            if self.users.get(name) is not None:
                self.users.delete(name)
        self.redirect(f"{self.hub.base_url}authorize")


class ChangePassword(_LabkitTemplates, ChangePasswordHandler):
    """``/hub/change-password`` on labkit's template, refusing a password labkit does not allow."""

    @web.authenticated
    async def post(self) -> None:
        """NativeAuthenticator's page, with the old password checked and the new one hashed on the hashing threads."""
        name = self.current_user.name
        new_password = self.get_body_argument("new_password", strip=False)
        problem = self.authenticator.password_problem(name, new_password)
        if problem is None and not await self.authenticator.password_matches(
                self.authenticator.get_user(name), self.get_body_argument("old_password", strip=False)):
            problem = "Your current password was incorrect. Please try again."
        if problem is None and new_password != self.get_body_argument("new_password_confirmation", strip=False):
            problem = "Your new password didn't match the confirmation. Please try again."
        if problem is None and not await self.authenticator.set_password(name, new_password):
            problem = "Something went wrong: your password was not changed."
        if problem is not None:
            await self.refuse("change-password.html", problem, user_name=name)
            return
        self.finish(await self.render_template("change-password.html", user_name=name, alert="alert-success",
                                               result_message="Your password has been changed successfully!"))


class ChangePasswordAdmin(_LabkitTemplates, ChangePasswordAdminHandler):
    """``/hub/change-password/NAME`` (admins) on labkit's template, refusing a password labkit does not allow."""

    @admin_only
    async def post(self, user_name: str) -> None:
        """NativeAuthenticator's page, with the new password hashed on the hashing threads."""
        new_password = self.get_body_argument("new_password", strip=False)
        problem = self.authenticator.password_problem(user_name, new_password)
        if problem is None and new_password != self.get_body_argument("new_password_confirmation", strip=False):
            problem = "The new password didn't match the confirmation. Please try again."
        if problem is None and not await self.authenticator.set_password(user_name, new_password):
            problem = f"There is no account {user_name}: no password was changed."
        if problem is not None:
            await self.refuse("change-password-admin.html", problem, user_name=user_name)
            return
        self.finish(await self.render_template("change-password-admin.html", user_name=user_name, alert="alert-success",
                                               result_message=f"The password for {user_name} has been changed successfully"))
