"""What ``workshop/jupyterhub_config.py`` needs from labkit: the settings, and each learner's workspace.

Why here and not in the config file: the hub runs this on every server start,
so it is type-checked and tested like the rest of labkit, and the config file
stays a list of JupyterHub settings an instructor can read.

Settings are environment variables (``LABKIT_WORKSHOP_*``, see
``workshop/README.md``), so ``make workshop TRACK=all`` and a systemd unit
set them the same way. Where each learner's workspace lives depends on who
runs the servers:

- ``shared-account`` (the default, for a single trusted machine and the
  tests): every server runs as the account that runs the hub; learner NAME
  works in ``LABKIT_WORKSHOP_HOMES/NAME/labkit-workspace`` (mode 0700). The
  server's root folder keeps learners apart in the file browser only: code a
  learner runs can read every file that account can.
- ``system-users``: every learner is a Unix account of the same name (the
  instructor creates them, e.g. ``useradd -m NAME``); their server runs as
  them and works in ``~NAME/labkit-workspace``. Home folders the others
  cannot enter (mode 0700) keep learners apart for real.

The workspace is made by ``python -m labkit workspace`` run as the learner
(never as root inside a learner's home: a learner could plant a link there),
so it never overwrites a learner's edits (see :mod:`labkit.tools.workspace`).
"""
from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from pathlib import Path

from labkit.core.errors import LabkitValueError
from labkit.tools.tracks import TRACKS

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE_NAME = "labkit-workspace"
SPAWNERS = ("shared-account", "system-users")
PREFIX = "LABKIT_WORKSHOP_"
# The names a learner may sign up with: a lowercase letter, then up to 23 lowercase letters, digits, "-" or "_".
# No whitespace, no markup, nothing a page or a shell could misread; short enough that ACCOUNT_PREFIX + name
# is a valid Unix account name (32 characters at most).
USERNAME_PATTERN = r"^[a-z][a-z0-9_-]{0,23}$"
USERNAME_RULE = "a lowercase letter, then up to 23 lowercase letters, digits, '-' or '_'"
ACCOUNT_PREFIX = "labkit-"  # learner NAME's Unix account (system-users): never collides with a system account


@dataclass(frozen=True)
class HubSettings:
    """The workshop's settings, read from ``LABKIT_WORKSHOP_*`` environment variables."""

    ip: str = "127.0.0.1"
    port: int = 8000
    track: str = "core"
    admin: str = "instructor"
    spawner: str = "shared-account"
    homes: Path = ROOT / "workshop" / "learners"  # shared-account: one folder per learner
    state: Path = ROOT / "workshop" / "state"  # the hub's database, cookie secret, proxy pid
    notebooks: Path = ROOT / "notebooks"
    mem_limit: str = "2G"
    threads: int = 2  # torch's threads per kernel: its default, one per core, oversubscribes a shared server
    cull_after_s: int = 3600
    kernel_cull_after_s: int = 1800  # a kernel left idle (the previous notebook's) is shut down, freeing its memory
    password: str = ""  # shared-password log-in when set, else NativeAuthenticator
    admin_password: str = ""

    @classmethod
    def from_environment(cls, env: dict[str, str] | None = None) -> HubSettings:
        env = dict(os.environ if env is None else env)
        defaults = cls()

        def get(name: str, default: object) -> str:
            return env.get(PREFIX + name.upper(), str(default))

        settings = cls(
            ip=get("ip", defaults.ip), port=_integer(PREFIX + "PORT", get("port", defaults.port)),
            track=get("track", defaults.track), admin=get("admin", defaults.admin),
            spawner=get("spawner", defaults.spawner), homes=Path(get("homes", defaults.homes)).resolve(),
            state=Path(get("state", defaults.state)).resolve(), notebooks=Path(get("notebooks", defaults.notebooks)).resolve(),
            mem_limit=get("mem_limit", defaults.mem_limit),
            threads=_integer(PREFIX + "THREADS", get("threads", defaults.threads)),
            cull_after_s=_integer(PREFIX + "CULL_AFTER_S", get("cull_after_s", defaults.cull_after_s)),
            kernel_cull_after_s=_integer(PREFIX + "KERNEL_CULL_AFTER_S",
                                         get("kernel_cull_after_s", defaults.kernel_cull_after_s)),
            password=get("password", ""), admin_password=get("admin_password", ""),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        """Refuse a setting the hub would misread, before it starts."""
        if self.track not in TRACKS:
            raise LabkitValueError(f"{PREFIX}TRACK={self.track!r}: choose one of {', '.join(TRACKS)}.")
        if self.spawner not in SPAWNERS:
            raise LabkitValueError(f"{PREFIX}SPAWNER={self.spawner!r}: choose one of {', '.join(SPAWNERS)}.")
        for name, value in (("THREADS", self.threads), ("CULL_AFTER_S", self.cull_after_s),
                            ("KERNEL_CULL_AFTER_S", self.kernel_cull_after_s)):
            if value < 1:
                raise LabkitValueError(f"{PREFIX}{name}={value}: give a whole number of at least 1.")
        if bool(self.password) != bool(self.admin_password):
            raise LabkitValueError(
                f"Set both {PREFIX}PASSWORD (learners) and {PREFIX}ADMIN_PASSWORD (the instructor, 32+ characters), "
                "or neither (learners then sign up and the instructor approves them)."
            )

    def workspace(self, username: str) -> Path:
        """Where learner ``username`` works: the root folder of their server."""
        if self.spawner == "system-users":
            return Path(pwd.getpwnam(username).pw_dir) / WORKSPACE_NAME
        return self.homes / username / WORKSPACE_NAME


def _integer(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise LabkitValueError(f"{name}={text!r}: give a whole number.") from None
