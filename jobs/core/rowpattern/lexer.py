"""Tokens of a MATCH_RECOGNIZE statement, each with its line and column. Comments
(``--`` to the end of the line, ``/* ... */``) are skipped; nothing is evaluated."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from jobs.core.errors import UserError
from jobs.core.rowpattern.model import Pos


class RowPatternError(UserError, ValueError):
    """A ``.sql`` pattern that cannot be read or checked: ``path:line:col: what``."""

    def __init__(self, path: str, pos: Pos | None, message: str):
        where = f"{path}:{pos.line}:{pos.col}" if pos else path
        super().__init__(f"{where}: {message}")
        self.path, self.pos, self.detail = path, pos, message


@dataclass(frozen=True)
class Token:
    kind: str  # ident, qident, number, string, op, end
    text: str
    pos: Pos

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "ident" else ""


_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>--[^\n]*|/\*.*?\*/)
  | (?P<number>\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<qident>"(?:[^"]|"")*")
  | (?P<string>'(?:[^']|'')*')
  | (?P<op>\{-|-\}|<=|>=|<>|!=|\|\||[-+*/%(),.;=<>?{}^$|\[\]])
""", re.VERBOSE | re.DOTALL)


def tokens(text: str, path: str) -> list[Token]:
    """The statement's tokens, ending with an ``end`` token."""
    out: list[Token] = []
    i, line, line_start = 0, 1, 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        pos = Pos(line, i - line_start + 1)
        if m is None:
            if text.startswith("/*", i):
                raise RowPatternError(path, pos, "a comment /* is never closed")
            quote = text[i]
            if quote in "'\"":
                raise RowPatternError(path, pos, f"a {quote} is never closed")
            raise RowPatternError(path, pos, f"unexpected character {text[i]!r}")
        kind, value = m.lastgroup, m.group()
        if kind == "qident":
            out.append(Token("qident", value[1:-1].replace('""', '"'), pos))
        elif kind == "string":
            out.append(Token("string", value[1:-1].replace("''", "'"), pos))
        elif kind not in ("space", "comment"):
            out.append(Token(kind, value, pos))
        newlines = value.count("\n")
        if newlines:
            line += newlines
            line_start = i + value.rindex("\n") + 1
        i = m.end()
    out.append(Token("end", "", Pos(line, i - line_start + 1)))
    return out


def statement_version(text: str, path: str) -> str:
    """A digest of a statement's tokens: comments and layout do not change it."""
    blob = "\x1f".join(f"{t.kind}:{t.text}" for t in tokens(text, path))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
