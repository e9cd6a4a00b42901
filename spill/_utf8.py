"""A text's UTF-8 bytes for hashing and writing, without copying a long ASCII text.

A body is hashed (its ref) and written as its UTF-8 bytes. ``str.encode`` copies them out
first: for a 10 MB output that copy (and the fresh pages it lands in) costs more than the xxh3
hash itself, and it is made again by every store ``put``. For a compact ASCII ``str`` CPython
already holds exactly those bytes: :c:func:`PyUnicode_AsUTF8AndSize` returns a pointer to
them (for an ASCII text it neither copies nor caches anything), and
:c:func:`PyMemoryView_FromMemory` wraps them in a read-only memoryview. Both are public,
documented C API, called through ``ctypes.pythonapi`` with the GIL held.

The view does not keep the text alive, so it is only ever handed out by :func:`utf8_of`, a
context manager that holds the text and releases the view on exit. Texts that are not ASCII,
short texts (where the call costs more than the copy it saves), interpreters other than CPython
and a CPython where the self-check below fails all get ``text.encode()`` instead: the bytes are
the same either way, so refs never depend on which path was taken.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

__all__ = ["ZERO_COPY", "ZERO_COPY_MIN_CHARS", "encode_text", "utf8_of"]

ZERO_COPY_MIN_CHARS: Final = 64 * 1024
"""Shorter texts are encoded: a copy of a few KB costs less than two ctypes calls."""
_PyBUF_READ: Final = 0x100


def encode_text(text: str) -> bytes:
    """The bytes a body is stored and hashed as (UTF-8, lone surrogates kept)."""
    return text.encode("utf-8", "surrogatepass")


def _bind() -> Callable[[str], memoryview] | None:
    """A function from an ASCII ``str`` to a view of its own bytes, or None where unavailable."""
    if sys.implementation.name != "cpython":
        return None
    try:
        api = ctypes.pythonapi
        as_utf8 = api.PyUnicode_AsUTF8AndSize
        from_memory = api.PyMemoryView_FromMemory
    except (AttributeError, OSError):  # pragma: no cover - a CPython built without them
        return None
    as_utf8.argtypes = (ctypes.py_object, ctypes.POINTER(ctypes.c_ssize_t))
    as_utf8.restype = ctypes.c_void_p
    from_memory.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int)
    from_memory.restype = ctypes.py_object

    def view(text: str) -> memoryview:
        size = ctypes.c_ssize_t()
        address = as_utf8(text, ctypes.byref(size))
        out: memoryview = from_memory(address, size.value, _PyBUF_READ)
        return out

    # Trust it only if it gives exactly what encode gives, on a text built at run time.
    probe = "".join(chr(32 + i % 95) for i in range(4096))
    try:
        sample = view(probe)
        ok = sample.readonly and sample.format == "B" and sample.tobytes() == encode_text(probe)
        sample.release()
    except Exception:  # pragma: no cover - any failure means: use the copy
        return None
    return view if ok else None


_VIEW: Final = _bind()
ZERO_COPY: Final = _VIEW is not None
"""Whether long ASCII texts are hashed and written without a copy in this interpreter."""


@contextmanager
def utf8_of(text: str) -> Iterator[bytes | memoryview]:
    """The UTF-8 (surrogatepass) bytes of ``text``, valid inside the ``with`` block only.

    A long ASCII ``str`` yields a read-only view of its own memory (released on exit: never
    keep it or a slice of it); anything else yields ``text.encode()``.
    """
    # ``type(...) is str``: a subclass could answer ``isascii`` or ``len`` with anything.
    if _VIEW is None or type(text) is not str or len(text) < ZERO_COPY_MIN_CHARS:
        yield encode_text(text)
        return
    if not text.isascii():
        yield encode_text(text)
        return
    view = _VIEW(text)
    try:
        yield view
    finally:
        view.release()
