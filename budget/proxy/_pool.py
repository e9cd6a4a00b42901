"""The proxy's open sessions: one :class:`budget.Budget` per conversation, opened on first use.

Each session has an asyncio lock: its requests are prepared one at a time (the decisions of one
conversation are made in order), while other sessions' run in worker threads beside them. The
usage the last response reported is kept for the session's next request, in memory and in a
sidecar of the session directory (``proxy_usage.json``), so a restarted proxy feeds the next
request the same usage an uninterrupted one would (issue 33: a restart gives the same copies).

Durability: a session's store writes each request's spilled bodies and decisions before
``prepare`` returns (a killed proxy loses none: the kernel holds them), and the proxy fsyncs
them while the upstream answers (:meth:`Slot.sync`, handed to a sync thread as the request's
body's last byte is written upstream: the bodies first, then the log, in the order the library
makes them), never before forwarding: a request never waits for a disk flush. The session's next request is prepared only once that
sync is done, and closing a session syncs it, so no decision is built upon before it is
durable. What a power loss or an OS crash in those milliseconds can take is the last request's
writes: its decisions (decided afresh on resume) or, where the filesystem kept its log lines
and not a body they point to, that body (the resumed copies are the same, and the resumed
session puts the body back from the text the agent sends again before a copy names it:
``budget.session._bodies.Bodies.restore_missing``). The usage sidecar is
written, not fsync'd, in the event loop, once the request's fsync is done and before the
session's next request is prepared (:meth:`Pool.note_usage`): in place, one ``write()`` of a few
hundred bytes, without the store's mutex (:meth:`spill.LocalStore.overwrite_sidecar`), so no
answer and no next request waits for a worker thread or a rename (issue 33). It holds the usage
with its checksum, padded with spaces to the longest one written before: after a power loss a
torn one is read as no usage.

Sessions idle for ``idle_close_s`` are closed (their lock released, so ``toolbudget gc`` can
collect them) when others are opened; at most ``max_open`` stay open.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
import xxhash
from anyio import to_thread

from budget import Budget
from budget._config import BudgetConfig
from budget._errors import BudgetError, ConfigError, StoreError
from budget._log import get_logger
from spill import LocalStore
from spill._fs import make_dirs

__all__ = ["Pool", "Slot"]

LOCK_WAIT_S: Final = 0.5
"""How long opening a session waits for its lock: long enough for this proxy's own close of an
idle session to finish, short enough that a session another process holds (a second proxy on
the same root) costs its requests half a second before they pass through unbudgeted."""
USAGE_META: Final = "proxy_usage"
"""The session metadata key a proxy before the usage sidecar kept the last usage in (read when
there is no sidecar, so a session it left resumes the same)."""
USAGE_SIDECAR: Final = "proxy_usage.json"
"""The sidecar holding the last response's usage."""
SYNC_THREADS: Final = 8
"""Sessions' fsyncs made at once, each in a thread of the pool's own (:meth:`Pool.sync_soon`)."""


@dataclass(eq=False)
class Slot:
    """One open session and what the proxy keeps beside it."""

    key: str
    budget: Budget
    store: LocalStore
    """The session's store (``budget.store``), its fsyncs deferred (see :func:`_open`)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    usage: Mapping[str, Any] | None = None
    used_at: float = field(default_factory=time.monotonic)
    busy: int = 0
    """Requests of this session in flight (a busy session is never closed)."""
    syncing: asyncio.Task[None] | None = None
    """The fsyncs of the session's last forwarded request (:meth:`sync` in a worker thread)."""
    unsaved: Mapping[str, Any] | None = None
    """An answer's usage waiting for its request's fsync to be written to the sidecar."""
    usage_bytes: int = 0
    """The sidecar's length: a shorter usage is padded to it (its tail would be left behind)."""

    def sync(self) -> None:
        """fsync what the session's requests wrote and did not sync yet (in a worker thread)."""
        self.store.sync()


class Pool:
    """Open sessions by key under ``root``."""

    def __init__(
        self,
        root: Path,
        settings: Mapping[str, Any],
        *,
        max_open: int = 256,
        idle_close_s: float = 900.0,
    ) -> None:
        self.root = root
        self._settings = dict(settings)
        self._max_open = max_open
        self._idle_close_s = idle_close_s
        self._slots: dict[str, Slot] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        self._syncer: ThreadPoolExecutor | None = None
        self._log = get_logger("toolbudget")
        try:
            # Each missing directory 0700 whatever the umask, as Budget.open makes a session's.
            make_dirs(str(root))
        except OSError as exc:  # a file there, no permission: one error line, not a traceback
            raise StoreError(f"cannot use {root} as the proxy's session root: {exc}") from None
        if not os.access(root, os.W_OK | os.X_OK):
            # Else the proxy would serve, passing every request through unbudgeted.
            raise StoreError(
                f"cannot use {root} as the proxy's session root: no permission to write in it"
            )

    def _config(self, model: object) -> BudgetConfig:
        settings = dict(self._settings)
        if isinstance(model, str) and model and settings.get("model") is None:
            settings["model"] = model
        try:
            return BudgetConfig(**settings)
        except ConfigError:
            settings.pop("model", None)  # a model name the settings refuse: estimate without it
            return BudgetConfig(**settings)

    async def get(self, key: str, fmt: str, model: object) -> Slot:
        """The open session ``key`` (opened, or resumed from its directory, on first use), held
        busy until :meth:`release`."""
        slot = self._slots.get(key)
        if slot is not None:
            slot.used_at = time.monotonic()
            slot.busy += 1
            return slot
        opening = self._opening.setdefault(key, asyncio.Lock())
        try:
            async with opening:
                slot = self._slots.get(key)
                if slot is None:
                    config = self._config(model)
                    path = self.root / key
                    budget, store = await to_thread.run_sync(_open, path, config, fmt)
                    usage, size = _saved_usage(store)
                    slot = Slot(key, budget, store, usage=usage, usage_bytes=size)
                    # Busy before the idle ones are closed: the session just opened for this
                    # request is never among them (it was, once max_open others were busy).
                    slot.busy += 1
                    self._slots[key] = slot
                    await self._close_idle()
                else:
                    slot.busy += 1
        finally:
            self._opening.pop(key, None)
        slot.used_at = time.monotonic()
        return slot

    def release(self, slot: Slot) -> None:
        """A request of ``slot``'s session is done with it (see :meth:`get`)."""
        slot.busy -= 1
        slot.used_at = time.monotonic()

    def sync_soon(self, slot: Slot) -> asyncio.Future[None]:
        """The fsyncs of what the session's request wrote (:meth:`Slot.sync`), handed to a sync
        thread now, not from a task at the event loop's next turn: the thread starts while the
        request goes upstream (anyio's ``to_thread`` started it ~0.6 ms later at the median at
        800 rounds, and the session's next request waits for the end). Held busy until
        :meth:`synced`."""
        if self._syncer is None:
            self._syncer = ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix="toolbudget-sync")
        slot.busy += 1
        return asyncio.get_running_loop().run_in_executor(self._syncer, slot.sync)

    def sync_once(
        self, slot: Slot, spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]]
    ) -> Callable[[], None]:
        """The hand-off of a request's fsyncs (:meth:`sync_soon`, awaited by :meth:`synced` in a
        task ``spawn`` makes), made once whatever calls it again: as the request's body's last
        byte goes upstream (before it, the thread's wake-up and its hold of the GIL between
        fsyncs landed on the request's way out, the event loop giving the GIL up at each of
        httpcore's checkpoints), or as the request fails before that. The session's next
        request waits for the fsyncs as before (``slot.syncing``)."""
        handed = False

        def hand_off() -> None:
            nonlocal handed
            if not handed:
                handed = True
                slot.syncing = spawn(self.synced(slot, self.sync_soon(slot)))

        return hand_off

    async def synced(self, slot: Slot, syncing: asyncio.Future[None]) -> None:
        """Wait for :meth:`sync_soon`'s fsyncs (the durability note); a failure is an event,
        the next request retries it."""
        try:
            await syncing
        except (BudgetError, OSError) as exc:
            self._log.error(
                "toolbudget.proxy.sync_failed", session=slot.key, error=type(exc).__name__
            )
        finally:
            self.release(slot)

    def note_usage(self, slot: Slot, usage: Mapping[str, Any]) -> None:
        """Keep ``usage`` for the session's next request: in memory at once, in its sidecar once
        the session's last fsync is done (now, or as that fsync's task ends, in the event loop;
        the next request's :meth:`save_usage` writes it first if it comes before)."""
        slot.usage = dict(usage)
        slot.unsaved = slot.usage
        syncing = slot.syncing
        if syncing is None or syncing.done():
            self.save_usage(slot)
        else:
            syncing.add_done_callback(lambda _: self.save_usage(slot))

    def save_usage(self, slot: Slot) -> None:
        """Write the session's unsaved usage to its sidecar, if any: a few hundred bytes in
        place, no rename, no fsync, no lock a worker thread holds (the module's note)."""
        usage, slot.unsaved = slot.unsaved, None
        if usage is None:
            return
        data = _encode_usage(usage).ljust(slot.usage_bytes)
        try:
            slot.store.overwrite_sidecar(USAGE_SIDECAR, data)
        except (BudgetError, OSError) as exc:
            self._log.error(
                "toolbudget.proxy.usage_not_saved", session=slot.key, error=type(exc).__name__
            )
            return
        slot.usage_bytes = max(slot.usage_bytes, len(data))

    async def _close_idle(self) -> None:
        now = time.monotonic()
        idle = sorted(
            (s for s in self._slots.values() if s.busy == 0 and not s.lock.locked()),
            key=lambda s: s.used_at,
        )
        excess = len(self._slots) - self._max_open
        for slot in idle:
            if excess <= 0 and now - slot.used_at < self._idle_close_s:
                break
            if slot.busy or slot.lock.locked() or self._slots.get(slot.key) is not slot:
                continue  # taken by a request (or closed) while an earlier one was closing
            excess -= 1
            await self._close(slot)

    async def _close(self, slot: Slot) -> None:
        self._slots.pop(slot.key, None)
        self.save_usage(slot)  # its fsync is done: closing waits for nothing in flight
        try:
            await to_thread.run_sync(slot.budget.close)
        except (BudgetError, OSError) as exc:
            self._log.error(
                "toolbudget.proxy.close_failed", session=slot.key, error=type(exc).__name__
            )

    async def close(self) -> None:
        """Close every open session (the proxy is shutting down)."""
        for slot in list(self._slots.values()):
            await self._close(slot)
        if self._syncer is not None:
            self._syncer.shutdown()
            self._syncer = None

    def __len__(self) -> int:
        return len(self._slots)


def _open(path: Path, config: BudgetConfig, fmt: str) -> tuple[Budget, LocalStore]:
    """The session at ``path`` and its store, whose fsyncs are left to :meth:`Slot.sync` (the
    module's note)."""
    store = LocalStore(
        path,
        quota_bytes=config.quota_bytes,
        fsync=config.fsync,
        lock_timeout=LOCK_WAIT_S,
        defer_sync=True,
    )
    try:
        return Budget(store, config, format=fmt), store
    except BaseException:
        store.close()
        raise


def _encode_usage(usage: Mapping[str, Any]) -> bytes:
    """The sidecar's bytes for ``usage``: the usage with the checksum of its encoding."""
    encoded = orjson.dumps(usage)
    check = xxhash.xxh3_64_hexdigest(encoded).encode()
    return b'{"usage":' + encoded + b',"xxh3":"' + check + b'"}'


def _decode_usage(data: bytes) -> dict[str, Any] | None:
    """The usage a sidecar holds; None if it is torn (its checksum fails, or no JSON). A
    sidecar without a checksum is a proxy's from before the sidecar was written in place (by
    a rename: whole or absent), the usage itself."""
    try:
        saved = orjson.loads(data)  # the padding is JSON's trailing whitespace
    except orjson.JSONDecodeError:
        return None  # torn, or empty: created and not yet written
    if not isinstance(saved, dict):
        return None
    if "xxh3" not in saved:
        return saved
    usage = saved.get("usage")
    if not isinstance(usage, dict):
        return None
    encoded = orjson.dumps(usage)
    return usage if xxhash.xxh3_64_hexdigest(encoded) == saved["xxh3"] else None


def _saved_usage(store: LocalStore) -> tuple[dict[str, Any] | None, int]:
    """The usage the session's last response reported, as a proxy saved it (None if unknown),
    and the sidecar's length (a torn one's too: the next usage must cover all of it)."""
    try:
        data = store.read_sidecar(USAGE_SIDECAR)
        saved = store.read_meta().get(USAGE_META) if data is None else None
    except (BudgetError, OSError):
        return None, 0
    if data is None:
        return (saved if isinstance(saved, dict) else None), 0
    return _decode_usage(data), len(data)  # torn (a power loss mid-write): no usage


def session_root(root: str | os.PathLike[str]) -> Path:
    """``root`` as a path, ``~`` expanded."""
    return Path(root).expanduser()
