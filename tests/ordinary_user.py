"""The ordinary (unprivileged) user the hostile suites run as besides root: most people run proctor
unprivileged. As root, the user is created when missing (`useradd -m`), so a fresh CI machine runs both
sides; not as root, there is none (the suite itself is then the unprivileged run)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess

USER = os.environ.get("PROCTOR_TEST_USER", "proctor-hostile")


def ordinary_user(name: str = USER) -> pwd.struct_passwd | None:
    """The user's entry, created first when running as root and it does not exist; None when not root or
    when it cannot be created (no `useradd`)."""
    if os.geteuid() != 0:
        return None
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(name)
    if shutil.which("useradd") is None:
        return None
    subprocess.run(["useradd", "-m", name], check=False, capture_output=True)
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(name)
    return None
