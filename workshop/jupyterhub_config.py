"""JupyterHub for a labkit workshop on one server: `make workshop` starts it (see workshop/README.md).

Every setting an instructor changes is a LABKIT_WORKSHOP_* environment variable,
read by labkit.workshop.settings.HubSettings; this file only turns them into
JupyterHub configuration.
"""
import functools
import os
import sys
from pathlib import Path

import labkit
from labkit.learner.lab import server_args
from labkit.workshop.board_service import SERVER_TOKEN_SCOPES, board_roles, board_service, prepare_board_state
from labkit.workshop.front_proxy import caddy_service
from labkit.workshop.hosts import hub_host_settings, layout_warning
from labkit.workshop.provision import provision_workspace, server_environment, write_room_edition
from labkit.workshop.room import (
    check_isolation,
    check_room,
    front_proxy_secret,
    instructor_sign_up_code,
    prepare_state,
    what_trust_gives_away,
)
from labkit.workshop.settings import USERNAME_PATTERN, HubSettings

c = get_config()  # noqa: F821 (JupyterHub defines it when it loads this file)
settings = HubSettings.from_environment()  # refuses the shared account beyond loopback, a room without root
# A room refuses to start if a learner's code would run as root or serve pages on the hub's origin (no subdomains),
# or if a learner could read the solutions or change the code the hub runs.
check_isolation(settings)
if settings.unsafe_trusted:  # what the setting gives away, where the instructor starts the room
    print(what_trust_gives_away(settings), file=sys.stderr)
proxy = Path(__file__).resolve().parent / "node_modules"
check_room(settings, hub_code=[Path(labkit.__file__).parent, Path(__file__), Path(sys.prefix), Path(sys.base_prefix), proxy])
prepare_state(settings)  # the cookie secret and the database: the hub's account's alone (0700 folder, 0600 files)
prepare_board_state(settings)  # the room board's database and cookie secret: in the state folder, 0700
learner_bin = settings.learner_python.parent if settings.separated else Path(sys.executable).parent

# Where the hub listens (loopback unless LABKIT_WORKSHOP_IP says otherwise), and its state.
c.JupyterHub.ip = settings.ip
c.JupyterHub.port = settings.port
c.JupyterHub.db_url = f"sqlite:///{settings.state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(settings.state / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.pid_file = str(settings.state / "proxy.pid")
if (proxy / ".bin" / "configurable-http-proxy").exists():  # installed by `make workshop` (npm ci --prefix workshop)
    c.ConfigurableHTTPProxy.command = [str(proxy / ".bin" / "configurable-http-proxy")]

# Log-in: never an open hub. Learners sign up, the instructor approves them (NativeAuthenticator),
# or everyone uses one workshop password (LABKIT_WORKSHOP_PASSWORD) and the instructor their own.
# The instructor is not a JupyterHub admin (whose role includes access:servers): a role of their own below.
c.Authenticator.username_pattern = USERNAME_PATTERN  # every log-in: no whitespace, no markup, a valid account name
if settings.password:
    c.Authenticator.admin_users = {settings.admin}  # the shared-password log-in makes its admin a JupyterHub admin
    c.JupyterHub.authenticator_class = "labkit.workshop.auth.RoomPasswordAuthenticator"  # JupyterHub's, with a cap
    c.RoomPasswordAuthenticator.max_learners = settings.max_learners
    c.RoomPasswordAuthenticator.user_password = settings.password
    c.RoomPasswordAuthenticator.admin_password = settings.admin_password
    c.Authenticator.allow_all = True  # anyone with the password: the password is the gate
else:
    c.JupyterHub.authenticator_class = "labkit.workshop.auth.WorkshopAuthenticator"  # NativeAuthenticator, hardened
    c.WorkshopAuthenticator.instructors = {settings.admin}  # approved at sign-up, 12+ characters
    c.WorkshopAuthenticator.language = settings.language  # the log-in pages in the room's language
    c.WorkshopAuthenticator.attempts_per_minute = settings.login_attempts_per_minute  # per client address, then 429
    c.WorkshopAuthenticator.max_pending_sign_ups = settings.max_pending_sign_ups  # waiting for approval, at most
    # Whose X-Forwarded-For names the client: believed only with the secret the front proxy's config holds (Security).
    c.WorkshopAuthenticator.proxies_in_front = max(settings.proxies_in_front, int(settings.caddy))
    if c.WorkshopAuthenticator.proxies_in_front:
        c.WorkshopAuthenticator.front_proxy_secret = front_proxy_secret(settings)
    # Nobody takes the instructor's name first: signing up with it needs this code, printed here only.
    c.WorkshopAuthenticator.instructor_code = instructor_sign_up_code(settings)
    print(f"labkit: sign up as '{settings.admin}' at /hub/signup with the instructor's sign-up code "
          f"{c.WorkshopAuthenticator.instructor_code} (kept in {settings.state}).", file=sys.stderr)
    c.NativeAuthenticator.open_signup = False  # a sign-up waits for the instructor's approval at /hub/authorize
    c.Authenticator.allow_all = True  # NativeAuthenticator lets in only approved users: its approval is the gate
# The instructor sees every learner at /hub/admin, approves sign-ups, starts and stops servers. They open a
# learner's server only while she asks for help with a look (labkit.help("2.3", share=True)): her server is shared
# with the hub group instructors until the board closes the request (see instructor_scopes, board/queue.py).
# The hub only on its own host: the proxy's route for it names the host, so a learner's host (or the board's)
# serves her server's /user/NAME/ and nothing of the hub, no log-in page, no API (upstream: jupyterhub#2530).
# (A stopped server's URL then gets the proxy's 404, not the hub's offer to start it: start it at /hub/home.)
# With LABKIT_WORKSHOP_LEARNERS_DOMAIN each learner's host is off the hub's domain (labkit.workshop.hosts).
for name, value in hub_host_settings(settings).items():
    setattr(c.JupyterHub, name, value)
if layout_warning(settings):
    print(layout_warning(settings), file=sys.stderr)
# No page of the hub's or of a learner's server sends its address (a token or a secret in its query) to another origin
# as the Referer (the board sends the same).
REFERRER_POLICY = {"Referrer-Policy": "same-origin"}
c.JupyterHub.tornado_settings = {"headers": REFERRER_POLICY}
if settings.host_only_cookies:
    # __Host- cookies (Secure, this host only): a learner's host can neither set nor overwrite the hub's log-in cookies
    # (cookie tossing), and the hub never reads a cookie a learner's page set for the parent domain.
    c.JupyterHub.cookie_host_prefix_enabled = True
    c.JupyterHub.tornado_settings["cookie_options"] = {"secure": True}  # every cookie of the hub's, _xsrf too

# Each learner's server: JupyterLab in their own workspace, made on first log-in, kept after.
if settings.separated:  # a room: learner NAME's server runs as the Unix account labkit-NAME, from the learner venv
    c.JupyterHub.spawner_class = "labkit.workshop.spawner.LearnerSpawner"
    c.LearnerSpawner.account_prefix = settings.account_prefix
    write_room_edition(settings)  # the blank labs every workspace is made from, readable without the solutions
else:
    print("labkit: LABKIT_WORKSHOP_SPAWNER=shared-account: every learner's code runs as this hub's own account, so it can "
          "read and change every workspace, the solutions and the hub's state. For a trusted machine only; for a room, "
          "start the hub as root (workshop/README.md, Security).", file=sys.stderr)
    c.JupyterHub.spawner_class = "jupyterhub.spawner.SimpleLocalProcessSpawner"  # one account for all: trusted rooms
    c.SimpleLocalProcessSpawner.home_dir_template = str(settings.homes / "{username}")
c.Spawner.pre_spawn_hook = functools.partial(provision_workspace, settings=settings)
c.Spawner.cmd = [str(learner_bin / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.mem_limit = settings.mem_limit  # a room: a cgroup per server where the machine allows (labkit.workshop.memory)
c.Spawner.http_timeout = 120  # a busy two-core machine starts JupyterLab slowly
c.Spawner.start_timeout = 180
# torch starts one thread per core by default: thirty kernels on a 16-core server would run 480 threads.
# What each learner's server has in its environment, and nothing else of the hub's (labkit.workshop.provision):
# the room's language as LABKIT_LANG, where its kernel sends verdicts, the threads it may use.
c.Spawner.environment = server_environment(settings, learner_bin)
c.Spawner.server_token_scopes = SERVER_TOKEN_SCOPES
c.Spawner.disable_user_config = True  # a learner's ~/.jupyter config does not change what their server serves
c.Spawner.env_keep = ["LANG", "LC_ALL"]  # nothing else of the hub's environment (it holds the instructor's settings)
# labkit's JupyterLab defaults (labkit.learner.lab.server_args: widget state saved with the notebook, no news toast)
c.Spawner.args = [*server_args(settings.learner_python.parent.parent if settings.separated else None),
                  # learners rarely shut a kernel down: the previous notebook's would keep its memory all day
                  f"--MappingKernelManager.cull_idle_timeout={settings.kernel_cull_after_s}",
                  "--MappingKernelManager.cull_interval=300",
                  # the hub's answers about a token kept 10 s, not 5 min: a look refused within seconds of its end
                  "--HubOAuth.cache_max_age=10"]
if not settings.separated and os.geteuid() == 0:  # root in a container or a test: jupyter refuses root
    c.Spawner.args += ["--allow-root"]
# Over HTTPS a learner's JupyterLab sets its _xsrf cookie Secure too (tornado's kwargs); and it sends the hub's
# Referrer-Policy (jupyter_server's tornado_settings["headers"]).
server_tornado: dict[str, object] = {"headers": REFERRER_POLICY}
if settings.host_only_cookies:
    server_tornado["xsrf_cookie_kwargs"] = {"secure": True}
c.Spawner.args += [f"--ServerApp.tornado_settings={server_tornado!r}"]  # a Python literal, as traitlets reads it

# Idle servers stop after LABKIT_WORKSHOP_CULL_AFTER_S seconds (their workspaces stay).
# The room board (/services/labkit-board/): the instructor sees who solved what and who is stuck (workshop/README.md).
c.JupyterHub.services = [
    {"name": "idle-culler",
     "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={settings.cull_after_s}"]},
    board_service(settings),
    *([caddy_service(settings)] if settings.caddy else []),  # HTTPS in front: labkit.workshop.front_proxy
]
c.JupyterHub.load_roles = [
    {"name": "idle-culler", "services": ["idle-culler"],
     "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]},
    {"name": "labkit-instructor", "users": [settings.admin], "scopes": settings.instructor_scopes},
    *board_roles(settings),
]
c.JupyterHub.load_groups = {"instructors": {"users": [settings.admin]}}  # whom a learner's look is shared with
