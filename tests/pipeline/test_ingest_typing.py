"""Typing on columns equals the definition, ``typing.convert`` on each value: the common
forms go through Arrow kernels and numpy, the rest through ``convert`` once per distinct
value, and a property test over random texts and JSON values holds the two equal (value,
or the kind of problem). The JSON text a content-hash id digests equals ``json.dumps``."""

import json
import math

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.landing.ids import json_texts
from jobs.landing.reading import MISSING
from jobs.landing.typing import (
    MISSING_COLUMN,
    NOT_FINITE,
    NOT_KIND,
    OK,
    NotFinite,
    convert,
    type_column,
)

KINDS = ("string", "integer", "double", "timestamp")
digits = st.text("0123456789", min_size=1, max_size=4)
times = st.builds(
    lambda y, m, d, sep, hh, mm, ss, frac, zone: f"{y:04d}-{m:02d}-{d:02d}" + (
        "" if sep is None else f"{sep}{hh:02d}:{mm:02d}" + ("" if ss is None else f":{ss:02d}")
        + ("" if frac is None or ss is None else "." + frac) + (zone or "")),
    st.one_of(st.integers(1670, 2270), st.integers(1, 9999)), st.integers(0, 13),
    st.integers(0, 32),
    st.sampled_from([None, "T", " ", "x"]), st.one_of(st.sampled_from([0, 23, 24]),
                                                      st.integers(0, 99)),
    st.one_of(st.sampled_from([0, 59, 60]), st.integers(0, 99)),
    st.one_of(st.none(), st.sampled_from([0, 59, 60]), st.integers(0, 99)), st.one_of(st.none(), digits.map(lambda s: s * 3)),
    st.sampled_from([None, "Z", "+01:00", "-23:59", "+24:00", "+05:30", "z", "+00:60",
                     "+0100"]))
numbers = st.one_of(
    st.integers(-2**70, 2**70).map(str), st.floats(allow_nan=True).map(repr),
    st.builds(lambda a, b: f"{a}.{b}", st.integers(-10**20, 10**20), digits),
    st.sampled_from(["+5", " 12 ", "1_000", ".5", "5.", "1e400", "-0", "nan", "inf", "0x10",
                     "1E5", "00012", "-1.5e-7", "Infinity", "1e16", "١٢"]))
chars = st.text(st.sampled_from('ab"\\/\x00\x01\x7f é\u2028\U0001F600,:'), max_size=6)
texts = st.one_of(times, numbers, chars, st.text(max_size=6),
                  st.sampled_from(["", " ", "\u00a0", "\u2003", "\t", "\x1c", "\u200b"]))
json_values = st.one_of(st.none(), st.just(MISSING), st.booleans(), st.integers(-2**70, 2**70),
                        st.floats(allow_nan=True), texts, st.lists(st.integers(), max_size=2))


def expected(value, kind: str):
    if value is MISSING:
        return MISSING_COLUMN, None
    try:
        return OK, convert(value, kind)
    except NotFinite:
        return NOT_FINITE, None
    except (ValueError, TypeError, OverflowError):
        return NOT_KIND, None


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return a == b


def check(column, values, kind: str) -> None:
    got = column.values.to_pylist()
    for i, v in enumerate(values):
        problem, value = expected(v, kind)
        assert column.problem[i] == problem, (v, kind)
        if problem != OK:
            continue
        if kind == "timestamp" and value is not None and not -(2**63) <= value < 2**63:
            assert column.big[i] == value and got[i] is None, v
            continue
        assert same(got[i], value), (v, kind, got[i], value)


@settings(deadline=None)
@given(values=st.lists(texts, min_size=1, max_size=30), kind=st.sampled_from(KINDS))
def test_texts_are_typed_as_convert_types_each(values, kind):
    check(type_column(pa.array(values, pa.string()), kind, len(values)), values, kind)


@settings(deadline=None)
@given(values=st.lists(times, min_size=1, max_size=30))
def test_times_are_typed_as_convert_types_each(values):
    check(type_column(pa.array(values, pa.string()), "timestamp", len(values)), values,
          "timestamp")


near_times = st.builds(
    lambda base, at, char: base[:at] + char + base[at + 1:],
    st.sampled_from(["2024-02-29T23:59:59", "1999-12-31 00:00:00", "2023-02-29", "1677-01-01",
                     "2262-04-11T23:47:16"]),
    st.integers(0, 18), st.sampled_from(list("09-: Tx/\u0661") + ["é", "\x00"]))


@settings(deadline=None)
@given(values=st.lists(near_times, min_size=1, max_size=30))
def test_times_one_byte_from_a_common_form_are_typed_as_convert_types_each(values):
    """The two common forms are read by position from the values' bytes: a value one
    character away from one (a letter, a non-ASCII digit, a separator moved) is typed as
    ``convert`` types it."""
    arr = pa.array([None, *values], pa.string()).slice(1)
    check(type_column(arr, "timestamp", len(values)), values, "timestamp")


@settings(deadline=None)
@given(values=st.lists(json_values, min_size=1, max_size=30), kind=st.sampled_from(KINDS))
def test_json_values_are_typed_as_convert_types_each(values, kind):
    check(type_column(values, kind, len(values)), values, kind)


@settings(deadline=None)
@given(values=st.lists(st.one_of(st.none(), chars, st.text(max_size=8)), min_size=1,
                      max_size=20),
       numbers=st.lists(st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
                        min_size=1, max_size=20),
       ints=st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), min_size=1,
                     max_size=20),
       cut=st.integers(0, 20))
def test_the_digested_json_is_json_dumps(values, numbers, ints, cut):
    """Whole arrays, slices of them and chunked ones (text JSON writes as it is is found
    from the bytes between the slice's offsets)."""
    for data, kind, t in ((values, "string", pa.string()), (numbers, "double", pa.float64()),
                          (ints, "integer", pa.int64())):
        arr = pa.array(data, t)
        got = json_texts(arr, kind).to_pylist()
        assert got == [json.dumps(v) for v in data]
        k = min(cut, len(data))
        assert json_texts(arr.slice(k), kind).to_pylist() == got[k:]
        chunked = pa.chunked_array([arr.slice(0, k), arr.slice(k)], t)
        assert pa.chunked_array([json_texts(c, kind) for c in chunked.chunks]).to_pylist() == got


@given(data=st.binary(min_size=1, max_size=40))
def test_plain_bytes_are_the_bytes_json_writes_as_they_are(data):
    """The vectorised test of text JSON writes as it is (``ids._plain_bytes``) says what
    the regular expression says of the same bytes."""
    import re

    import numpy as np

    from jobs.landing.ids import _PLAIN, _plain_bytes

    assert _plain_bytes(np.frombuffer(data, np.uint8)) == \
        (re.fullmatch(_PLAIN, data.decode("latin-1")) is not None)


def test_a_time_in_every_common_form_is_exact():
    texts_ = ["2005-01-03", "2005-01-03T10:00:00Z", "2005-01-03 10:00:00.1234567+01:00",
              "1970-01-01T00:00:00.000000001", "1969-12-31T23:59:59.5", "2261-12-31T23:59:59",
              "1678-01-01", "2000-02-29", "1900-02-29", "2005-01-03T10:00-05:30"]
    col = type_column(pa.array(texts_), "timestamp", len(texts_))
    check(col, texts_, "timestamp")
    assert np.count_nonzero(col.problem) == 1  # 1900 was not a leap year


def _plain_by_regex(lines: pa.Array, kinds: dict) -> np.ndarray:
    """The fast-path rule of JSON lines in its plain form: every name once as a key (a
    regular expression per name), as many keys as names."""
    import re

    import pyarrow.compute as pc

    from jobs.landing.reading import MAX_LINE

    ok = np.asarray(pc.less(pc.binary_length(lines), MAX_LINE).to_numpy(
        zero_copy_only=False), bool)
    ok &= pc.count_substring_regex(lines, r'"\s*:').to_numpy(zero_copy_only=False) == len(kinds)
    for name in kinds:
        once = pc.count_substring_regex(lines, '"' + re.escape(name) + r'"\s*:')
        ok &= once.to_numpy(zero_copy_only=False) == 1
    odd = pc.match_substring_regex(lines, r"[0-9]{16}|\\u[dD][89a-fA-F]")
    return ok & ~np.asarray(odd.to_numpy(zero_copy_only=False), bool)


KEYS = ("patient", "value", "age", "e")
spacing = st.sampled_from(["", "", " ", "\t", "\r", "\f"])
key_texts = st.builds(lambda name, before, after: f'"{name}"{before}:{after}',
                      st.sampled_from(KEYS + ("page", "x")),
                      spacing, st.sampled_from(["", " "]))
every_key = st.permutations(KEYS).flatmap(lambda names: st.tuples(*[st.builds(
    lambda before, n=n: f'"{n}"{before}:', spacing) for n in names]).map(list))
json_lines = st.builds(
    lambda parts, values: "{" + ", ".join(k + v for k, v in zip(parts, values)) + "}",
    st.one_of(every_key, st.lists(key_texts, max_size=6)),
    st.lists(st.sampled_from(['1', '"a"', '" :x"', '"q\\" :"', 'null', '12345678901234567',
                              '"\\ud800"', '"\\"e\\":"']), min_size=6, max_size=6))


@settings(deadline=None)
@given(lines=st.lists(json_lines, min_size=1, max_size=12))
def test_json_lines_for_arrow_are_found_as_by_a_regular_expression_per_name(lines):
    """Which JSON lines go to Arrow's reader (each name once as a key, nothing else) is
    decided with substring searches and a regular expression only on lines with white
    space after a quote; the same lines as a regular expression per name picks."""
    from jobs.landing.jsonlines import plain_json

    kinds = dict.fromkeys(KEYS, "string")
    arr = pa.array(lines, pa.string())
    got = plain_json(arr, kinds).tolist()
    assert got == _plain_by_regex(arr, kinds).tolist()


@settings(deadline=None)
@given(lines=st.lists(st.text(alphabet='"\\ :\t\r\fpatienvlgu0123456789dD8a{},', max_size=60),
                      min_size=1, max_size=8), skip=st.integers(0, 1))
def test_json_lines_for_arrow_on_any_text_of_quotes_spaces_and_digits(lines, skip):
    """The lines' bytes read at once (quotes, white space, digit runs, backslashes placed
    in their lines by position) pick the lines the regular expressions pick, on text made
    of the characters that matter, in an array that starts anywhere."""
    from jobs.landing.jsonlines import plain_json

    kinds = dict.fromkeys(KEYS, "string")
    arr = pa.array(lines, pa.string()).slice(min(skip, len(lines) - 1))
    assert plain_json(arr, kinds).tolist() == _plain_by_regex(arr, kinds).tolist()


def test_json_lines_for_arrow_by_example():
    from jobs.landing.jsonlines import plain_json

    kinds = dict.fromkeys(KEYS, "string")
    lines = pa.array(['{"patient": 1, "value": 2, "age": 3, "e": 4}',
                      '{"patient" : 1, "value": 2, "age": 3, "e": 4}',
                      '{"patient": 1, "patient": 2, "age": 3, "e": 4}',
                      '{"patient": 1, "value": 2, "age": 3, "page": 4}'])
    assert plain_json(lines, kinds).tolist() == [True, True, False, False]
