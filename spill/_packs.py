"""Packs: the bodies of one group commit in one file, so a batch costs one create and one fsync.

A staleness batch over an adopted history spills hundreds of bodies at once. One file per body
costs a create (an inode, a directory entry, a journal transaction) each: about 1 ms per file
on this project's ext4 machines even with fsync off, 0.7-1 s for 796 bodies, against 10-30 ms
to write and fsync the same 6 MB once (``python -m benchmarks perf``, the batch row). So
:meth:`spill.LocalStore.put_many` writes the new bodies of a group into one pack, the way git
packs loose objects, and a pack is written exactly like a body (temp file, write, fsync, rename,
directory fsync) before any decision pointing into it is logged: the durable order is the same.

A body stays addressed by its ref alone; a pack only says where its bytes are, and every read
checks them against the ref (the content hash) as a body file's are. A pack is immutable once
renamed into place. Its layout::

    b"TBPACK01"                      8 bytes, the format
    index length                     8 bytes, unsigned little-endian
    index                            JSON array of [ref, offset, length], offsets from the start
    bodies                           each body's bytes, in the index's order

named ``bodies/pack-<xxh3-128 of the index>.pack``. The index is read when a ref is first
looked for (never on open: resuming a session reads no body and no pack), and a pack that does
not parse is skipped with a warning, never trusted.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from typing import Final, NamedTuple, TypeVar

import orjson
import xxhash

from spill import _fs
from spill._errors import RefError, StoreError
from spill._sessiondir import BODIES_NAME
from spill._store import REF_RE, events

__all__ = [
    "PACK_RE",
    "Located",
    "PackIndex",
    "encode_pack",
    "file_or_packed",
    "pack_chunks",
    "read_copies",
    "read_located",
]

_T = TypeVar("_T")

MAGIC: Final = b"TBPACK01"
_HEAD: Final = len(MAGIC) + 8
PACK_RE: Final = re.compile(r"\Apack-[0-9a-f]{32}\.pack\Z")
_MAX_INDEX: Final = 8 << 20
"""A bound on the index read from disk: a damaged or planted length must not make us allocate
gigabytes (a 60 MB index parses into about 1 GB of Python objects; 8 MB into about 140 MB).
:func:`pack_chunks` keeps every pack written under it: about 100,000 bodies each."""
_ENTRY_MAX: Final = 80
"""The most bytes one index entry takes: ``["<32 hex>",<offset>,<length>],``, 19 digits each."""
_READ_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK


class Located(NamedTuple):
    """Where a packed body's bytes are: its pack's name in ``bodies/``, offset and length."""

    pack: str
    offset: int
    length: int


def encode_pack(bodies: Sequence[tuple[str, bytes]]) -> tuple[str, bytes, dict[str, Located]]:
    """(the pack's file name, its bytes, where each body is) for ``bodies``: pairs of (ref, data)
    with distinct refs."""
    entries: list[tuple[str, int, int]] = []
    offset = 0
    for ref, data in bodies:
        entries.append((ref, offset, len(data)))
        offset += len(data)
    # Offsets are fixed once the index's own length is known; its digits can grow that length,
    # so the index is encoded with the final offsets until its length no longer changes.
    base = _HEAD
    while True:
        index = orjson.dumps([[ref, base + off, n] for ref, off, n in entries])
        if _HEAD + len(index) == base:
            break
        base = _HEAD + len(index)
    name = f"pack-{xxhash.xxh3_128_hexdigest(index)}.pack"
    head = MAGIC + len(index).to_bytes(8, "little")
    where = {ref: Located(name, base + off, n) for ref, off, n in entries}
    return name, b"".join((head, index, *(data for _, data in bodies))), where


def pack_chunks(bodies: Sequence[_T]) -> list[Sequence[_T]]:
    """``bodies`` cut into runs short enough that each run's pack index fits :data:`_MAX_INDEX`
    (a pack written with a longer one would be skipped on read, and its bodies lost)."""
    size = max(1, _MAX_INDEX // _ENTRY_MAX)
    return [bodies[i : i + size] for i in range(0, len(bodies), size)]


def read_index(fd: int, name: str) -> dict[str, Located]:
    """The refs of the open pack ``fd`` (file ``name``) and where each is; ValueError if damaged,
    cut short included."""
    found, cut = read_index_cut(fd, name)
    if cut:
        raise ValueError(f"cut short: {cut} of its bodies lie past its end")
    return found


def read_index_cut(fd: int, name: str) -> tuple[dict[str, Located], int]:
    """(the refs of the open pack ``fd`` whose bytes it holds, how many its index lists past its
    end); ValueError if its header or index is damaged.

    A pack is never cut short by a crash (it is renamed into place once whole), but a copy of a
    session can be: the bodies before the cut are still there, each checked by its ref on read.
    """
    st = _fs.stat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("not a regular file")
    head = _fs.read(fd, 0, _HEAD)
    if len(head) < _HEAD or head[: len(MAGIC)] != MAGIC:
        raise ValueError("no pack header")
    size = int.from_bytes(head[len(MAGIC) :], "little")
    if size > _MAX_INDEX or _HEAD + size > st.st_size:
        raise ValueError(f"index of {size} bytes does not fit the file")
    raw = _fs.read(fd, _HEAD, size)
    if name != f"pack-{xxhash.xxh3_128_hexdigest(raw)}.pack":
        raise ValueError("index does not match the pack's name")
    try:
        entries = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"index is not JSON: {exc}") from None
    if not isinstance(entries, list):
        raise ValueError("index is not a list")
    out: dict[str, Located] = {}
    cut = 0
    for entry in entries:
        if not (
            isinstance(entry, list)
            and len(entry) == 3  # [ref, offset, length]
            and isinstance(entry[0], str)
            and REF_RE.match(entry[0])
            and all(type(v) is int and v >= 0 for v in entry[1:])
            and entry[1] >= _HEAD + size
        ):
            raise ValueError(f"bad index entry {str(entry)[:80]}")
        if entry[1] + entry[2] > st.st_size:
            cut += 1
            continue
        out.setdefault(entry[0], Located(name, entry[1], entry[2]))
    return out, cut


def read_located(bodies_fd: int, where: Located) -> bytes:
    """The bytes ``where`` points at, in the pack under ``bodies_fd``; OSError, or ValueError
    when the pack is not a regular file or is shorter than its index says."""
    fd = _fs.open_fd(where.pack, _READ_FLAGS, dir_fd=bodies_fd)
    try:
        if not stat.S_ISREG(_fs.stat(fd).st_mode):
            raise ValueError(f"{where.pack} is not a regular file")
        data = _fs.read(fd, where.offset, where.length)
    finally:
        _fs.close(fd)
    if len(data) != where.length:
        raise ValueError(f"{where.pack} is shorter than its index says")
    return data


def read_copies(bodies_fd: int, copies: Sequence[Located], ref: str) -> tuple[bytes, str]:
    """The bytes of the first of ``copies`` whose hash is ``ref``, else of the first that could
    be read (its caller reports it corrupt), each with the name of its pack; the first OSError
    or ValueError if none could."""
    first: tuple[bytes, str] | None = None
    error: OSError | ValueError | None = None
    for where in copies:
        try:
            data = read_located(bodies_fd, where)
        except (OSError, ValueError) as exc:
            error = error or exc
            continue
        if xxhash.xxh3_128_hexdigest(data) == ref:
            return data, where.pack
        first = (data, where.pack) if first is None else first
    if first is None:
        raise error or ValueError("no copy to read")
    return first


def file_or_packed(
    ref: str,
    data: bytes | None,
    refused: StoreError | None,
    read_packed: Callable[[], tuple[bytes, str] | None],
    *,
    what: str,
    session: str,
) -> bytes:
    """The body of ``ref``: its file's bytes ``data`` when they hash to ``ref``, else a pack's.

    ``refused`` is why the file could not be read (something planted where it goes, never
    followed), raised when no pack holds the body either; RefError when nothing holds it, and
    StoreError naming what holds it (``what``, the file, or the pack ``read_packed`` read) when
    that does not match the ref.
    """
    if data is None or xxhash.xxh3_128_hexdigest(data) != ref:
        # Packed, or a damaged file whose body a later group commit packed whole.
        packed = read_packed()
        if packed is not None:
            # The bytes judged below are the pack's: a damaged pack must be the file named.
            data, pack = packed
            what = f"{ref} in {BODIES_NAME}/{pack}"
    if data is None:
        if refused is not None:
            raise refused
        raise RefError(f"no body is stored for ref {ref} in session {session}")
    if xxhash.xxh3_128_hexdigest(data) != ref:
        raise StoreError(
            f"body {what} in session {session} is corrupt: its content does not match its ref"
        )
    return data


def _skipped(session: str, name: str, reason: str) -> None:
    events().warning("toolbudget.spill.pack_skipped", path=session, pack=name, reason=reason)


class PackIndex:
    """Every packed ref of a session's ``bodies/`` and where it is, loaded on first need.

    A ref is in two packs only when one was skipped by an earlier process (unreadable then) and
    the ref stored again: every copy is kept, so a read that finds one damaged tries the next.
    """

    __slots__ = ("_loaded", "_more", "_refs")

    def __init__(self) -> None:
        self._refs: dict[str, Located] = {}
        self._more: dict[str, list[Located]] = {}  # the further copies of a ref, rare
        self._loaded: set[str] = set()

    def _keep(self, ref: str, where: Located) -> None:
        first = self._refs.setdefault(ref, where)
        more = self._more.get(ref, [])
        if where != first and where not in more:
            self._more[ref] = [*more, where]

    def load(
        self,
        bodies_fd: int,
        session: str,
        names: Iterable[str] | None = None,
    ) -> None:
        """Read the index of every pack in ``bodies/`` (or among ``names``) not read yet, with a
        warning naming ``session`` for each that cannot be read or parsed (skipped) or is cut
        short (the bodies before the cut are kept)."""
        if names is None:
            names = _fs.listdir(bodies_fd)
        for name in names:
            if name in self._loaded or not PACK_RE.match(name):
                continue
            self._loaded.add(name)
            try:
                fd = _fs.open_fd(name, _READ_FLAGS, dir_fd=bodies_fd)
            except FileNotFoundError:
                continue
            except OSError as exc:
                _skipped(session, name, exc.strerror or str(exc))
                continue
            try:
                found, cut = read_index_cut(fd, name)
            except (OSError, ValueError) as exc:
                _skipped(session, name, str(exc))
                continue
            finally:
                _fs.close(fd)
            if cut:
                events().warning(
                    "toolbudget.spill.pack_cut",
                    path=session,
                    pack=name,
                    reason=f"{cut} bodies lie past its end; {len(found)} kept",
                )
            for ref, where in found.items():
                self._keep(ref, where)

    def add(self, name: str, where: dict[str, Located]) -> None:
        """Record a pack this process has just put in place."""
        self._loaded.add(name)
        for ref, located in where.items():
            self._keep(ref, located)

    def get(self, ref: str) -> Located | None:
        return self._refs.get(ref)

    def copies(self, ref: str) -> list[Located]:
        """Every place a pack holds ``ref``, the first found first; [] if none does."""
        first = self._refs.get(ref)
        return [] if first is None else [first, *self._more.get(ref, ())]

    def body_bytes(self) -> int:
        """The bytes of the packed bodies (each ref once), as counted against the quota."""
        return sum(where.length for where in self._refs.values())
