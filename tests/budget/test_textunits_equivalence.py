"""The text estimator's per-byte sum by Adler-32 gives the units the popcount it replaced gave:
the old sum is kept here, as it was, and compared with the new one on arbitrary texts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget.tokens._textunits import (
    _CHAR_UNITS,
    _CHUNK_BYTES,
    _MAX_BYTE_UNITS,
    ANTHROPIC_PROFILE,
    DEFAULT_PROFILE,
    GOOGLE_PROFILE,
    OPENAI_PROFILE,
    TokenizerProfile,
    _byte_units,
    text_units,
)
from tests._lanes import examples

# -- the popcount sum text_units() used before ----------------------------------------------------

_OLD_MAX_ASCII_UNITS = 8
_OLD_CHUNK = 1 << 15
_OLD_HIGH_NIBBLES = int.from_bytes(b"\xf0" * (4 * _OLD_CHUNK), "little")


class _OldTables(NamedTuple):
    ascii: bytes | None
    wide: bytes


def _old_tables(overrides: Mapping[str, int]) -> _OldTables:
    units = {**_CHAR_UNITS, **overrides}
    ascii_table, wide_table = bytearray(256), bytearray(256)
    ascii_fits = True
    for b in range(256):
        weight = _byte_units(b, units)
        if b < 0x80:
            if weight > _OLD_MAX_ASCII_UNITS:
                ascii_fits = False
            else:
                ascii_table[b] = (1 << weight) - 1
        hi, lo = divmod(weight, 5)
        wide_table[b] = ((1 << hi) - 1) << 4 | ((1 << lo) - 1)
    return _OldTables(bytes(ascii_table) if ascii_fits else None, bytes(wide_table))


def _old_text_units(text: str, tables: _OldTables) -> int:
    ascii_table = tables.ascii
    if ascii_table is not None and text.isascii():
        units = 0
        for start in range(0, len(text), _OLD_CHUNK):
            codes = text[start : start + _OLD_CHUNK].encode("ascii").translate(ascii_table)
            units += int.from_bytes(codes, "little").bit_count()
        return units
    units = 0
    for start in range(0, len(text), _OLD_CHUNK):
        chunk = text[start : start + _OLD_CHUNK].encode("utf-8", "surrogatepass")
        value = int.from_bytes(chunk.translate(tables.wide), "little")
        units += value.bit_count() + 4 * (value & _OLD_HIGH_NIBBLES).bit_count()
    return units


_PROFILES = (DEFAULT_PROFILE, ANTHROPIC_PROFILE, OPENAI_PROFILE, GOOGLE_PROFILE)

# Every class of byte (ASCII letters, digits, punctuation, blanks, newlines, 2-, 3- and 4-byte
# characters, lone surrogates), in runs long enough to cross the chunks of both sums.
_CHARS = st.sampled_from(
    ["a", "Z", "7", "{", " ", "\t", "\n", "é", "ж", "क", "→", "日", "😀", "\ud800"]
)
_RUNS = st.lists(st.tuples(_CHARS, st.integers(1, 3_000)), min_size=1, max_size=6)
_TEXTS = st.one_of(
    st.text(max_size=300),
    _RUNS.map(lambda runs: "".join(c * n for c, n in runs)),
    # Past the new sum's chunk of 2,729 bytes and the old one's of 32,768 characters.
    st.tuples(_RUNS, st.integers(2_000, 40_000)).map(
        lambda t: "".join(c * n for c, n in t[0]) * (t[1] // sum(n for _, n in t[0]) + 1)
    ),
)


@settings(max_examples=examples(500), deadline=None)
@given(_TEXTS, st.sampled_from(_PROFILES))
def test_the_adler_sum_is_the_popcount_sum(text: str, profile: TokenizerProfile) -> None:
    """Under every profile, the weights summed chunk by chunk with Adler-32 are the units the
    popcount of the translated bytes gave."""
    old = _old_tables(dict(profile.class_units))
    assert text_units(text, profile._tables) == _old_text_units(text, old)


@pytest.mark.parametrize(
    "n", [_CHUNK_BYTES - 1, _CHUNK_BYTES, _CHUNK_BYTES + 1, 3 * _CHUNK_BYTES, 3 * _CHUNK_BYTES + 7]
)
def test_chunks_of_the_heaviest_byte_allowed_sum_exactly(n: int) -> None:
    """A profile whose letters weigh the most a byte may (24 units) counts ``n`` letters, at,
    around and past the chunk size, as 24 * ``n``: no chunk's sum reaches Adler-32's modulus."""
    heavy = TokenizerProfile("heavy", 11, 4, 2, 16, 20, class_units=(("letter", _MAX_BYTE_UNITS),))
    assert text_units("a" * n, heavy._tables) == _MAX_BYTE_UNITS * n
