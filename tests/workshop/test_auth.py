"""labkit.workshop.auth without a hub: the name and password rules, the routes, and labkit's templates rendered
with hostile names (every attribute quoted, every name escaped, approval by POST forms only)."""
from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import nativeauthenticator
import pytest
from jinja2 import DictLoader, Environment
from tornado import web

from labkit.workshop import auth
from labkit.workshop.settings import USERNAME_RULE

ADMIN = "instructor"
# Names an attacker signs up with: attributes after tabs (the reported attack), markup, quotes, whitespace.
HOSTILE_NAMES = [
    "u\ttabindex=1\tautofocus\tonfocus=window.__pwned=1",
    "<script>window.__pwned=2</script>",
    'x"><img src=x onerror=window.__pwned=3>',
    "x' onmouseover='window.__pwned=4",
    "two words",
    "slash/name",
    "name\n",
    "a" * 25,
    "9lives",
    "",
]
GOOD_NAMES = ["ada", "grace-hopper", "learner_01", "a" * 24]
# The stand-in for JupyterHub's page.html: the blocks labkit's pages fill, nothing else.
PAGE = "{% block script %}{% endblock %}{% block main %}{% endblock %}"
# What an injected name would add to an element (a log-in form's field has autofocus of its own).
INJECTED_ATTRIBUTES = {"onfocus", "onerror", "onmouseover", "onload", "onclick", "tabindex", "autofocus"}


@pytest.fixture
def authenticator() -> auth.WorkshopAuthenticator:
    return auth.WorkshopAuthenticator(add_new_table=False, admin_users={ADMIN})


class _Elements(HTMLParser):
    """Every start tag with its attributes, as a browser's tokenizer splits them."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))


def elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Elements()
    parser.feed(html)
    parser.close()
    return parser.elements


def assert_nothing_injected(html: str) -> None:
    """No element got an event handler or a focus attribute from a name, and no name became markup."""
    for tag, attributes in elements(html):
        injected = sorted(set(attributes) & INJECTED_ATTRIBUTES - ({"autofocus"} if tag == "input" else set()))
        assert not injected, f"<{tag}> got attributes {injected} from a name:\n{html}"
    assert "<img" not in html and "<script>window" not in html, html


def hub_environment(**templates: str) -> Environment:
    """An environment like the hub's (autoescape on) whose own templates are ``templates`` (and the page stand-in)."""
    return Environment(loader=DictLoader({"page.html": PAGE, **templates}), autoescape=True)


def render(name: str, base: Environment | None = None, language: str = "en", **namespace: object) -> str:
    environment = auth.templates_first(base or hub_environment(), language)
    defaults = {"base_url": "/hub/", "xsrf": "the-xsrf-token", "login_url": "/hub/login"}
    return environment.get_template(name).render(**{**defaults, **namespace})


class _Info:
    """A row of NativeAuthenticator's users_info table, as the authorization area gets it."""

    def __init__(self, username: str, is_authorized: bool = False) -> None:
        self.username, self.is_authorized, self.email, self.has_2fa = username, is_authorized, "", False


# --- names ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_name_is_refused_with_the_rule(authenticator: auth.WorkshopAuthenticator, name: str):
    assert not authenticator.validate_username(authenticator.normalize_username(name))
    problem = authenticator.username_problem(name)
    assert problem is not None and USERNAME_RULE in problem
    assert authenticator.create_user(name, "a good long password") is None  # refused before the database


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_a_name_by_the_rule_is_accepted(authenticator: auth.WorkshopAuthenticator, name: str):
    assert authenticator.validate_username(name)
    assert authenticator.username_problem(name) is None


def test_uppercase_is_lowered_before_the_rule(authenticator: auth.WorkshopAuthenticator):
    assert authenticator.normalize_username("Grace") == "grace"
    assert authenticator.username_problem("Grace") is None


# --- passwords --------------------------------------------------------------------------------------------------------


def test_a_learner_needs_8_characters_and_the_instructor_12(authenticator: auth.WorkshopAuthenticator):
    assert auth.LEARNER_MINIMUM == 8 and auth.ADMIN_MINIMUM == 12
    assert "at least 8 characters" in authenticator.password_problem("ada", "x7chars")
    assert authenticator.password_problem("ada", "8 chars!") is None
    for short in ("x", "11 chars!!!"):
        problem = authenticator.password_problem(ADMIN, short)
        assert "instructor" in problem and "at least 12 characters" in problem
    assert authenticator.password_problem("Instructor", "11 chars!!!") is not None  # the admin's name, normalized
    assert authenticator.password_problem(ADMIN, "twelve chars") is None


def test_common_and_overlong_passwords_are_refused(authenticator: auth.WorkshopAuthenticator):
    assert "common" in authenticator.password_problem("ada", "123qweasdzxc")
    assert "72 bytes" in authenticator.password_problem("ada", "é" * 37)  # 37 characters, 74 bytes: bcrypt refuses


def test_a_refused_password_creates_and_changes_nothing(authenticator: auth.WorkshopAuthenticator):
    assert authenticator.create_user(ADMIN, "x") is None  # refused before the database (there is none here)
    assert authenticator.change_password(ADMIN, "11 chars!!!") is None


# --- routes -----------------------------------------------------------------------------------------------------------


def test_every_page_is_labkits_and_approval_has_no_get(authenticator: auth.WorkshopAuthenticator):
    routes = dict(authenticator.get_handlers(app=None))
    assert set(routes) == {r"/login", r"/signup", r"/authorize", r"/authorize/([^/]+)", r"/discard/([^/]+)",
                           r"/change-password", r"/change-password/([^/]+)"}  # no /confirm/ (self-approval)
    for handler in routes.values():
        assert handler.__module__ == auth.__name__
    for changes_state in (auth.ToggleApproval, auth.Discard):
        assert changes_state.get is web.RequestHandler.get, "tornado's own get: 405, nothing changes"
        assert changes_state.post is not web.RequestHandler.post


def test_labkit_has_its_own_copy_of_every_page_nativeauthenticator_renders():
    upstream = {path.name for path in (Path(nativeauthenticator.__file__).parent / "templates").glob("*.html")}
    ours = {path.name for path in auth.TEMPLATES.glob("*.html")}
    # page.html only adds menu items; my_message.html belongs to /confirm/, which labkit does not serve
    assert upstream - {"page.html", "my_message.html"} <= ours


# --- templates --------------------------------------------------------------------------------------------------------


def test_the_checker_sees_the_reported_attack():
    """An unquoted attribute, as in NativeAuthenticator 1.3.0: escaping alone lets the tab-separated attributes in."""
    html = hub_environment(unsafe="<tr id={{ name }}></tr>").get_template("unsafe").render(name=HOSTILE_NAMES[0])
    with pytest.raises(AssertionError, match="onfocus"):
        assert_nothing_injected(html)


@pytest.mark.parametrize("name", HOSTILE_NAMES[:4])
def test_the_authorization_area_quotes_escapes_and_posts(name: str):
    unsafe = hub_environment(**{"authorization-area.html": "<tr id={{ users[0].username }}></tr>"})
    html = render("authorization-area.html", unsafe, users=[_Info(name), _Info("ada", is_authorized=True)],
                  ask_email=False)
    assert_nothing_injected(html)
    rows = [attributes for tag, attributes in elements(html) if tag == "tr" and "id" in attributes]
    assert [row["id"] for row in rows] == [name, "ada"], "each row's id is exactly the name"
    forms = [attributes for tag, attributes in elements(html) if tag == "form"]
    path = quote(name, safe="")
    assert forms == [{"method": "post", "action": f"/hub/authorize/{path}"},
                     {"method": "post", "action": f"/hub/discard/{path}"},
                     {"method": "post", "action": "/hub/authorize/ada"}]
    hidden = [attributes for tag, attributes in elements(html) if tag == "input"]
    assert hidden == [{"type": "hidden", "name": "_xsrf", "value": "the-xsrf-token"}] * 3
    links = [attributes["href"] for tag, attributes in elements(html) if tag == "a"]
    assert links == [f"/hub/change-password/{path}", "/hub/change-password/ada"], "no link approves or discards"


@pytest.mark.parametrize("name", HOSTILE_NAMES[:4])
def test_the_other_pages_quote_and_escape_a_name(name: str):
    pages = {
        "signup.html": {"alert": "alert-danger", "result_message": name, "username_rule": USERNAME_RULE},
        "native-login.html": {"username": name, "login_error": f"User {name} has not been authorized", "next": "%2F"},
        "change-password.html": {"user_name": name, "result_message": name, "alert": "alert-danger"},
        "change-password-admin.html": {"user_name": name, "result_message": name, "alert": "alert-danger"},
    }
    for template, namespace in pages.items():
        html = render(template, **namespace)
        assert_nothing_injected(html)
        assert all("_xsrf" not in attributes.get("name", "") or attributes["value"] == "the-xsrf-token"
                   for tag, attributes in elements(html) if tag == "input"), template
    login = render("native-login.html", username=name)
    values = [attributes.get("value") for tag, attributes in elements(login) if attributes.get("name") == "username"]
    assert values == [name], "the name fills the log-in form's field, quoted, as it was typed"


def test_the_sign_up_page_states_the_rule():
    html = render("signup.html", username_rule=USERNAME_RULE)
    assert "A username is a lowercase letter" in html


@pytest.mark.parametrize(("language", "words"), [
    ("zh", ["登录", "用户名：", "密码：", json.dumps("隐藏"), json.dumps("显示"), '<a href="/hub/signup">注册</a>']),
    ("ru", ["Войти", "Имя пользователя:", "Пароль:", json.dumps("Скрыть"), json.dumps("Показать"),
            '<a href="/hub/signup">Зарегистрируйтесь</a>']),
])
def test_the_log_in_pages_speak_the_rooms_language(language: str, words: list[str]):
    """The words, the button's Show/Hide (a JSON string in the page's script) and the links, in the room's language."""
    base = hub_environment()
    login = render("native-login.html", base, language, enable_signup=True, login_error="x")
    assert all(word in login for word in words), [word for word in words if word not in login]
    assert not any(english in login for english in ("Password:", "Username:", '"Hide"', "Sign In")), login
    signup = render("signup.html", base, language, username_rule=USERNAME_RULE)
    assert "Password:" not in signup and "A username is" not in signup
    change = render("change-password.html", base, language, user_name="<b>ada</b>")
    assert "&lt;b&gt;ada&lt;/b&gt;" in change and "Old password:" not in change, "the name still escaped, the words translated"
    assert "_" not in base.globals and "gettext" not in base.globals, "the hub's own environment is left as it was"
    assert "Password:" in render("native-login.html", base), "an English room's pages as before"


def test_the_instructors_name_needs_the_sign_up_code(authenticator: auth.WorkshopAuthenticator):
    authenticator.instructor_code = "the-code-the-hub-printed"
    for attempt in ("", "a guess", "the-code-the-hub-printe"):
        assert "needs the instructor's sign-up code" in authenticator.instructor_code_problem(ADMIN, attempt)
        assert "needs the instructor's sign-up code" in authenticator.instructor_code_problem(ADMIN.upper(), attempt)
    assert authenticator.instructor_code_problem(ADMIN, "the-code-the-hub-printed\n") is None
    assert authenticator.instructor_code_problem("ada", "") is None  # a learner leaves the field empty


def test_without_a_code_nobody_signs_up_as_the_instructor(authenticator: auth.WorkshopAuthenticator):
    assert "no instructor's sign-up code" in authenticator.instructor_code_problem(ADMIN, "")
    assert authenticator.instructor_code_problem("ada", "") is None


def test_instructors_are_approved_at_sign_up_without_being_admins(monkeypatch):
    authenticator = auth.WorkshopAuthenticator(add_new_table=False, instructors={"teacher"})
    monkeypatch.setattr(nativeauthenticator.NativeAuthenticator, "get_authed_users", lambda self: {"ada"})  # no database
    assert authenticator.is_instructor("Teacher") and not authenticator.is_instructor("ada")
    assert authenticator.get_authed_users() == {"ada", "teacher"} and "teacher" not in authenticator.admin_users
    assert "at least 12 characters" in authenticator.password_problem("teacher", "only eleven")


# --- log-in that cannot stall the hub -------------------------------------------------------------------------------


def test_attempts_per_address_are_limited_per_minute():
    limit = auth.AttemptLimit(3)
    assert [limit.wait_s("10.0.0.1", now=t) for t in (0.0, 1.0, 2.0)] == [0.0, 0.0, 0.0]
    assert limit.wait_s("10.0.0.1", now=3.0) == pytest.approx(57.0)
    assert limit.wait_s("10.0.0.2", now=3.0) == 0.0, "another address is not held up"
    assert limit.wait_s("10.0.0.1", now=60.5) == 0.0, "the first attempt left the window"
    assert "wait 57 s and try again" in auth.AttemptLimit.message(57.0)


def test_the_limit_remembers_a_bounded_number_of_addresses():
    limit = auth.AttemptLimit(1, addresses=100)
    for number in range(1000):
        limit.wait_s(f"10.0.{number // 256}.{number % 256}", now=float(number))
    assert len(limit._seen) <= 101


class _SignUp:
    """What NativeAuthenticator's table holds for one name (the fields authenticate reads)."""

    def __init__(self, password: bytes, is_authorized: bool = True) -> None:
        self.password, self.is_authorized, self.has_2fa = password, is_authorized, False


def test_a_password_is_checked_off_the_event_loop(authenticator: auth.WorkshopAuthenticator, monkeypatch):
    """bcrypt (about 0.2 s a check) runs on a hashing thread, so the hub's event loop keeps serving meanwhile.

    No timing: the patched check waits until a coroutine on the event loop has run. Were the check on the
    loop (as it was), that coroutine could not run, and the check would give up after 10 s and say so.
    """
    import asyncio
    import threading

    import bcrypt

    stored = bcrypt.hashpw(b"learner passphrase", bcrypt.gensalt(4))
    monkeypatch.setattr(authenticator, "get_user", lambda name: _SignUp(stored) if name == "ada" else None)
    real_check = bcrypt.checkpw
    loop_ran = threading.Event()
    checks_on: list[str] = []

    def check_once_the_loop_has_run(password: bytes, hashed: bytes) -> bool:
        checks_on.append(threading.current_thread().name)
        assert loop_ran.wait(10), "the event loop stood still while bcrypt checked a password"
        return real_check(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", check_once_the_loop_has_run)

    async def check(password: str) -> str | None:
        loop_ran.clear()

        async def mark_the_loop_running() -> None:
            await asyncio.sleep(0)
            loop_ran.set()

        marker = asyncio.create_task(mark_the_loop_running())
        try:
            return await authenticator.authenticate(None, {"username": "ada", "password": password})
        finally:
            await marker

    for password, expected in (("learner passphrase", "ada"), ("a wrong guess", None)):
        assert asyncio.run(check(password)) == expected
    assert checks_on and all(name.startswith("labkit-bcrypt") for name in checks_on), checks_on
    assert asyncio.run(check("x" * 73)) is None, "over bcrypt's 72 bytes: refused, never an error"


def test_pending_sign_ups_are_capped_with_a_message(authenticator: auth.WorkshopAuthenticator, monkeypatch):
    authenticator.max_pending_sign_ups = 2
    monkeypatch.setattr(authenticator, "get_unauthed_amount", lambda: 2)
    assert "2 sign-ups are already waiting for the instructor's approval" in authenticator.pending_problem("ada")
    assert authenticator.pending_problem(ADMIN) is None, "the instructor still signs up"
    monkeypatch.setattr(authenticator, "get_unauthed_amount", lambda: 1)
    assert authenticator.pending_problem("ada") is None


def test_the_shared_password_lets_in_at_most_max_learners_new_names():
    import asyncio

    from jupyterhub import orm

    db = orm.new_session_factory("sqlite://")()
    for name in ("ada", "grace", ADMIN):
        db.add(orm.User(name=name, admin=name == ADMIN))
    db.commit()

    class Handler:
        def __init__(self) -> None:
            self.db = db

        def find_user(self, name: str) -> object | None:
            return db.query(orm.User).filter_by(name=name).first()

    room = auth.RoomPasswordAuthenticator(user_password="the room's password", admin_password="a" * 32,
                                          admin_users={ADMIN}, max_learners=2)

    def log_in(name: str, password: str = "the room's password") -> object:
        return asyncio.run(room.authenticate(Handler(), {"username": name, "password": password}))

    assert log_in("ada")["name"] == "ada", "a name that logged in before keeps logging in"
    with pytest.raises(web.HTTPError) as full:
        log_in("mallory")
    assert full.value.status_code == 403 and "The room is full: 2 learners" in full.value.log_message
    assert log_in("mallory", "a wrong guess") is None
    assert log_in(ADMIN, "a" * 32)["admin"] is True, "the instructor is never counted or refused"
    room.max_learners = 3
    assert log_in("mallory")["name"] == "mallory"


class _Socket:
    """A connection's socket: the hub's proxy (or a learner's code) at 127.0.0.1:5555, the hub at 127.0.0.1:8081."""

    def getpeername(self) -> tuple[str, int]:
        return "127.0.0.1", 5555

    def getsockname(self) -> tuple[str, int]:
        return "127.0.0.1", 8081


SECRET = "the front proxy's secret"


@pytest.mark.parametrize("forwarded, in_front, proof, from_the_proxy, address", [
    ("", 0, "", True, "127.0.0.1"),  # no header: the connection's own address
    ("203.0.113.5, 127.0.0.1", 1, SECRET, True, "203.0.113.5"),  # the HTTPS proxy in front named the client
    ("6.6.6.6, 203.0.113.5, 127.0.0.1", 1, SECRET, True, "203.0.113.5"),  # what the client made up stays to the left
    ("10.9.9.9, 127.0.0.1", 1, "", True, "127.0.0.1"),  # the hub's proxy reached past the front one: not believed
    ("10.9.9.9, 127.0.0.1", 1, "a guess", True, "127.0.0.1"),
    ("6.6.6.6, 127.0.0.1", 0, SECRET, True, "127.0.0.1"),  # no proxy in front: a made-up entry is never read
    ("10.9.9.9", 0, "", False, "127.0.0.1"),  # a learner's code at the hub's own port: its headers are not read
    ("10.9.9.9, 127.0.0.1", 1, SECRET, False, "127.0.0.1"),
])
def test_the_client_address_is_read_only_from_the_proxies_that_prove_it(
        forwarded: str, in_front: int, proof: str, from_the_proxy: bool, address: str, monkeypatch):
    from types import SimpleNamespace

    from tornado.httputil import HTTPHeaders, HTTPServerRequest

    headers = HTTPHeaders({"X-Forwarded-For": forwarded, "X-Real-Ip": "10.9.9.9", auth.FRONT_PROXY_HEADER: proof})
    request = HTTPServerRequest(method="POST", uri="/hub/login", headers=headers,
                                connection=SimpleNamespace(stream=SimpleNamespace(socket=_Socket())))
    request.remote_ip = "10.9.9.9"  # what JupyterHub's tornado (xheaders) makes of the headers: never read
    authenticator = auth.WorkshopAuthenticator(add_new_table=False, proxies_in_front=in_front, front_proxy_secret=SECRET)
    monkeypatch.setattr(authenticator, "from_the_hubs_proxy", lambda request: from_the_proxy)
    assert authenticator.client_address(request) == address
