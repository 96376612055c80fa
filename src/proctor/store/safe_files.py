"""Checks that a file a run folder holds is the folder's own: a plain file (not a symbolic link, a device or
a folder), with no other hard link, so that opening it never reads or writes anything outside the folder.

SQLite opens (and may create) side files next to a database — `-wal`, `-shm`, `-journal` — and follows
links when it does, so a database is checked together with its side files (`check_sqlite`). A link of any
kind, dangling or not, is refused rather than followed; so is a hard-linked file (its other name may be
anywhere). A process that swaps a checked file for a link between the check and the open is not covered:
these checks guard against hostile run folders, not against a hostile process racing the viewer.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

SQLITE_SIDE_SUFFIXES = ("-wal", "-shm", "-journal")


class UnsafeStoreFile(Exception):
    """A file in a run folder that must not be opened: the message says which (by its name in the folder)
    and why, never where a link points."""


def check_plain(path: Path, *, may_be_missing: bool = True) -> bool:
    """Whether `path` exists as a plain file of its folder; UnsafeStoreFile for a link (dangling or not),
    anything but a regular file, or a file with other hard links; False when it is missing and may be."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if may_be_missing:
            return False
        raise UnsafeStoreFile(f"{path.name} is missing") from None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeStoreFile(f"{path.name} is a symbolic link (links are never followed)")
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeStoreFile(f"{path.name} is not a regular file")
    if st.st_nlink > 1:
        raise UnsafeStoreFile(f"{path.name} has other hard links (it may be a file outside the runs folder)")
    return True


def check_sqlite(path: Path, *, must_exist: bool) -> None:
    """A SQLite database and its side files are all plain files of their folder (or missing)."""
    check_plain(path, may_be_missing=not must_exist)
    for suffix in SQLITE_SIDE_SUFFIXES:
        check_plain(path.with_name(path.name + suffix))


def check_folder(folder: Path) -> None:
    """`folder` is a real folder, not a symbolic link to one."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        raise UnsafeStoreFile(f"{folder.name} does not exist") from None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeStoreFile(f"{folder.name} is a symbolic link (links are never followed)")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeStoreFile(f"{folder.name} is not a folder")


def read_plain(path: Path, limit: int, *, head: bool = False) -> bytes:
    """The bytes of a plain file (checked on the open file itself: no link is followed, even one put in
    place after an earlier check); UnsafeStoreFile otherwise or when it holds more than `limit` bytes.
    `head`: its first `limit` bytes, whatever its size."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise UnsafeStoreFile(f"{path.name} is missing") from None
    except OSError:
        raise UnsafeStoreFile(f"{path.name} cannot be opened without following a link") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeStoreFile(f"{path.name} is not a regular file")
        if st.st_nlink > 1:
            raise UnsafeStoreFile(f"{path.name} has other hard links")
        if st.st_size > limit and not head:
            raise UnsafeStoreFile(f"{path.name} is larger than {limit // 1_000_000} MB")
        return fh.read(limit + 1)[:limit]


SQLITE_MAGIC = b"SQLite format 3\x00"


def check_sqlite_header(path: Path) -> None:
    """`path` (a checked plain file) starts as a SQLite database and is as long as its header says: a
    truncated copy reads as a database until a query reaches a missing page. sqlite3.DatabaseError else.
    An empty file passes (SQLite reads it as a database with no tables)."""
    first = read_plain(path, 100, head=True)
    if not first:
        return
    if len(first) < 100 or not first.startswith(SQLITE_MAGIC):
        raise sqlite3.DatabaseError("file is not a database")
    page_size = int.from_bytes(first[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(first[28:32], "big")
    valid = first[24:28] == first[92:96]  # the page count is valid when written by the same change
    size = os.lstat(path).st_size
    if valid and pages and size < pages * page_size:
        raise sqlite3.DatabaseError(f"database file is truncated ({size:,} of {pages * page_size:,} bytes)")
