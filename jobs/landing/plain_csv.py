"""CSV pieces whose every line is one well-formed record, read by Arrow's CSV reader.

A line is well formed (``_LINES``) when it holds two fields or more, separated by commas,
each of them either bare (no quote, comma, carriage return, line end or NUL) or quoted as
a whole: an opening quote; characters other than a quote, a carriage return, a line end
and a NUL, or a quote written twice; a closing quote. The line may end with a carriage
return before its line end. On such lines Python's ``csv`` reader (the definition,
``reading.csv_blocks``) and Arrow's reader (a quote written twice stands for one) give the
same fields, and each line is one record. Whether a whole piece is made of them is one
pass of a regular expression over its text (RE2: linear time); a piece with any other
line (an empty one, a quote inside a bare field, text after a closing quote, a quoted line
end) is read line by line instead, and so is a piece with a row of another width than the
header's, which Arrow refuses (the line-by-line reader refuses it as ragged).
"""

from __future__ import annotations

import csv

import pyarrow as pa
import pyarrow.compute as pc

from jobs.landing.lines import line_at, one_value

_QUOTED = r'"(?:[^"\r\n\x00]|"")*"'
_BARE = r'[^",\r\n\x00]*'
_FIELD = f"(?:{_QUOTED}|{_BARE})"
_LINE = f"{_FIELD}(?:,{_FIELD})+"
_LINES = rf"\A(?:{_LINE}\r?\n)*(?:{_LINE})?\z"


def plain_body(data: bytes, header: bool) -> memoryview | None:
    """The bytes of ``data`` after its header line (``header``: it holds the file's header)
    when every line of them is well formed (the module's definition) and there is one;
    None otherwise, and for bytes that are not UTF-8 (the line-by-line reader names the
    error)."""
    offset = 0
    if header:
        offset = data.find(b"\n") + 1
        if offset == 0:
            return None
    body = memoryview(data)[offset:]
    if not len(body):
        return None
    try:
        text = one_value(body).cast(pa.string())
    except pa.ArrowInvalid:
        return None
    return body if pc.match_substring_regex(text, _LINES)[0].as_py() else None


def read_plain(body: memoryview, names: list[str], wanted: list[str]
               ) -> dict[str, pa.Array] | None:
    """The values of columns ``wanted`` (of the file's ``names``) of a well-formed body
    (``plain_body``), as text, by Arrow's CSV reader; None when a row has another number
    of fields than ``names``."""
    import pyarrow.csv as pcsv

    if not wanted:
        return None
    try:
        table = pcsv.read_csv(
            pa.BufferReader(pa.py_buffer(body)),
            read_options=pcsv.ReadOptions(column_names=names, use_threads=False,
                                          block_size=max(len(body) + 1, 1 << 16)),
            parse_options=pcsv.ParseOptions(quote_char='"', double_quote=True,
                                            escape_char=False, newlines_in_values=False,
                                            ignore_empty_lines=False),
            convert_options=pcsv.ConvertOptions(
                column_types={c: pa.string() for c in wanted}, include_columns=wanted,
                strings_can_be_null=False, quoted_strings_can_be_null=False))
    except pa.ArrowInvalid:
        return None
    return {c: table.column(c).combine_chunks() for c in wanted}


def line_fields(body: memoryview):
    """``fields(i)``: the fields of the body's line ``i`` as Python's reader gives them (for
    the quarantine's raw text)."""
    text = line_at(body)
    return lambda i: next(csv.reader([text(i)]))
