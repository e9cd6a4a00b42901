"""Refs: how they are derived from text, and how a ref from a model is validated."""

from __future__ import annotations

from pathlib import Path

import pytest
import xxhash

from budget._errors import RefError, StoreError
from spill import REF_RE, LocalStore, MemoryStore, ref_for, validate_ref


@pytest.mark.parametrize(
    "text", ["", "hello", "日本語のテキスト", "emoji 🎉🧪", "tab\tnul\x00end", "lone \ud800 high"]
)
def test_ref_is_xxh3_128_of_utf8_surrogatepass(text: str) -> None:
    """ref_for is the xxh3-128 hex digest of the text's UTF-8 bytes, lone surrogates kept."""
    ref = ref_for(text)
    assert ref == xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass"))
    assert REF_RE.match(ref)
    assert validate_ref(ref) == ref


class _LyingStr(str):
    """A str subclass whose isascii and len lie: a ref must not trust them."""

    def isascii(self) -> bool:
        return True

    def __len__(self) -> int:
        return 10**9


_LONG = 64 * 1024
LONG_TEXTS = {
    "ascii 64 KiB": "a" * _LONG,
    "ascii 64 KiB minus one": "b" * (_LONG - 1),
    "ascii 1 MB log": "".join(f"{i:7d} build step ok\n" for i in range(50_000)),
    "non-ascii long": "é" * _LONG,
    "non-ascii at the end": "c" * _LONG + "日本",
    "lone surrogate long": "d" * _LONG + "\ud800",
    "subclass lying about ascii": _LyingStr("e" * _LONG + "ü"),
}


@pytest.mark.parametrize("name", list(LONG_TEXTS))
def test_long_texts_get_the_ref_of_their_encoded_bytes(name: str, tmp_path: Path) -> None:
    """Long texts get the ref of their encoded bytes, and both stores agree and keep those bytes."""
    text = LONG_TEXTS[name]
    data = str.encode(text, "utf-8", "surrogatepass")
    ref = ref_for(text)
    assert ref == xxhash.xxh3_128_hexdigest(data)
    with LocalStore(tmp_path / "s", fsync=False) as local, MemoryStore() as memory:
        assert local.put(text) == ref == memory.put(text)
        assert memory.bodies_bytes == len(data)
        assert (tmp_path / "s" / "bodies" / ref[:2] / f"{ref}.txt").read_bytes() == data
        assert local.get(ref) == text


def test_refs_of_long_texts_are_pinned() -> None:
    """Refs are content addresses already on disk: the same text keeps the same ref forever."""
    assert ref_for("x" * 65_536) == "02da4b9c5a75caad3688558138047f8a"
    log = "".join(f"{i:7d} build step ok\n" for i in range(50_000))
    assert ref_for(log) == "eaa8849f4d0093b8c01231b3249b31ee"


def test_refs_differ_for_texts_differing_in_one_surrogate() -> None:
    """Two texts that differ only in a lone surrogate get different refs."""
    assert ref_for("a\ud800") != ref_for("a\udc00")
    assert ref_for("a\ud800") != ref_for("a")


def test_ref_regex_rejects_a_trailing_newline() -> None:
    """REF_RE does not accept a valid ref followed by a newline (no `$` loophole)."""
    ref = ref_for("x")
    assert REF_RE.match(ref)
    assert REF_RE.match(ref + "\n") is None
    with pytest.raises(RefError):
        validate_ref(ref + "\n")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("../../etc/passwd", "16 characters, expected 32"),
        ("/etc/passwd" + "0" * 21, "characters outside [0-9a-f]: '/'"),
        ("0" * 31 + "\x00", "'\\x00'"),
        ("0" * 16 + "/" + "0" * 15, "'/'"),
        ("ABCDEF" + "0" * 26, "uppercase hex is not accepted"),
        ("0" * 31, "31 characters, expected 32"),
        ("0" * 33, "33 characters, expected 32"),
        ("", "0 characters, expected 32"),
        ("g" * 32, "'g'"),
        ("０" * 32, "'\\uff10'"),
    ],
)
def test_invalid_refs_raise_ref_error_naming_the_problem(value: str, expected: str) -> None:
    """Malformed refs raise RefError whose message names the length or the bad characters."""
    with pytest.raises(RefError) as info:
        validate_ref(value)
    assert expected in str(info.value)


@pytest.mark.parametrize("value", [None, 12, 1.5, b"0" * 32, ["0" * 32], {"ref": "0" * 32}])
def test_non_string_refs_raise_ref_error_naming_the_type(value: object) -> None:
    """A ref that is not a str raises RefError naming the type it got."""
    with pytest.raises(RefError) as info:
        validate_ref(value)
    assert type(value).__name__ in str(info.value)


def test_ref_error_never_echoes_a_path_and_is_a_store_error() -> None:
    """The message for a path-like ref does not repeat the path, and RefError is a StoreError."""
    with pytest.raises(RefError) as info:
        validate_ref("../../etc/passwd")
    assert "etc" not in str(info.value)
    assert isinstance(info.value, StoreError)
    assert isinstance(info.value, KeyError)


def test_a_very_long_ref_is_reported_briefly() -> None:
    """A megabyte-long garbage ref gives a short message, listing only a few characters."""
    with pytest.raises(RefError) as info:
        validate_ref("一二三/" * 250_000)
    message = str(info.value)
    assert "1000000 characters" in message
    assert "'/'" in message
    assert len(message) < 300


@pytest.mark.parametrize("value", [None, 12, b"bytes", ["text"]])
def test_ref_for_refuses_what_is_not_text_naming_its_type(value: object) -> None:
    """ref_for of a non-str raises StoreError naming the type, not a bare AttributeError."""
    with pytest.raises(StoreError, match=type(value).__name__):
        ref_for(value)  # type: ignore[arg-type]
