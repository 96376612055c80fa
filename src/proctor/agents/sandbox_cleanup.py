"""Removing a folder a hostile program had its hands on: never follows a link, never raises, and removes
the folder whatever the program made of it.

`shutil.rmtree` and `tempfile` cleanup recurse (a deep enough tree raises RecursionError or runs out of
descriptors or path length) and some interpreter versions chmod through symlinks to get past a
permission-stripped directory. Here the walk is iterative, holds one directory descriptor at a time (a
tree 10,000 deep needs no more), goes back up through `..` checked against the device and inode it came
from, and changes modes only on directories it opened with O_NOFOLLOW (never on whatever a link names).
Callers kill the program's processes first, so nothing moves the tree while it is removed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat

log = logging.getLogger(__name__)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, parent_fd: int) -> int | None:
    """A descriptor of the directory `name` under `parent_fd` (never a link), made readable and writable
    by us if the program stripped its permissions; None if it is not a directory or cannot be opened."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except PermissionError:
        pass
    except OSError:
        return None
    try:  # an O_PATH descriptor opens a mode-000 directory; chmod goes through it, never through a link
        pfd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
    except OSError:
        return None
    try:
        os.chmod(f"/proc/self/fd/{pfd}", 0o700)
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError:
        return None
    finally:
        os.close(pfd)


def _unlink(name: str, dir_fd: int) -> bool:
    try:
        os.unlink(name, dir_fd=dir_fd)
        return True
    except FileNotFoundError:
        return True
    except PermissionError:
        with contextlib.suppress(OSError):  # the directory itself was made read-only
            os.fchmod(dir_fd, 0o700)
            os.unlink(name, dir_fd=dir_fd)
            return True
    except OSError:
        pass
    return False


def remove_tree(path: str) -> bool:
    """Remove `path` and everything under it; True when it is gone. Never raises (a failure is logged)."""
    try:
        return _remove(path)
    except FileNotFoundError:  # nothing there (any more)
        return not os.path.lexists(path)
    except Exception as e:  # cleanup must never break the run that called it
        log.warning("sandbox: could not remove %s: %r", path, e)
        return not os.path.lexists(path)


def _remove(path: str) -> bool:
    parent_path, base = os.path.split(os.path.abspath(path))
    top_parent = os.open(parent_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        top = _open_dir(base, top_parent)
        if top is None:  # not a directory (or a link to one): remove the entry itself
            _unlink(base, top_parent)
            return not os.path.lexists(path)
        fd = top
        names: list[str] = []  # the path from the top down to fd
        ids: list[tuple[int, int]] = []  # (device, inode) of each directory above fd
        stuck: set[tuple[int, int, str]] = set()  # entries that would not go (logged once each)
        while True:
            here = os.fstat(fd)
            child: str | None = None
            with os.scandir(fd) as it:
                for entry in it:
                    key = (here.st_dev, here.st_ino, entry.name)
                    if key in stuck:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        child = entry.name
                        break
                    if not _unlink(entry.name, fd):
                        stuck.add(key)
                        log.warning("sandbox: could not remove %s/.../%s", path, entry.name)
            if child is not None:
                sub = _open_dir(child, fd)
                if sub is None:
                    stuck.add((here.st_dev, here.st_ino, child))
                    continue
                names.append(child)
                ids.append((here.st_dev, here.st_ino))
                fd = sub
                continue
            if not names:  # back at the top with nothing left under it
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.rmdir(base, dir_fd=top_parent)
                return not os.path.lexists(path)
            up = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = up
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != ids.pop():
                os.close(fd)
                raise OSError(f"the tree under {path} moved while it was removed")
            name = names.pop()
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                if not stat.S_ISDIR(st.st_mode) or not _retry_rmdir(name, fd):
                    stuck.add((st.st_dev, st.st_ino, name))
                    log.warning("sandbox: could not remove the directory %s/.../%s", path, name)
    finally:
        os.close(top_parent)


def _retry_rmdir(name: str, dir_fd: int) -> bool:
    with contextlib.suppress(OSError):
        os.fchmod(dir_fd, 0o700)
        os.rmdir(name, dir_fd=dir_fd)
        return True
    return False
