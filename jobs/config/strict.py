"""Reading a conf/ file strictly, as pattern and model files are read: safe YAML only, and
every key checked against what the file may hold, so a typo is an error with ``path:line``
and the nearest known key, never a setting silently ignored."""

from __future__ import annotations

import difflib
from pathlib import Path

import yaml

from jobs.core.errors import UserError

ANY = None  # any value
FREE = "free"  # a mapping whose keys are free (Spark settings, storage options, columns)
EACH = "*"  # a mapping of names (profiles, sources) whose values all have one shape


class ConfigError(UserError, ValueError):
    """A configuration file that cannot be used; the message names file, line and entry."""


def read(path: Path, shape: dict) -> tuple[dict, dict[tuple, int]]:
    """The document of ``path`` and the line of each key (by its path of keys), after
    checking its keys against ``shape`` (a dict of key -> shape, ``ANY``, or a set of
    leaf keys; ``{EACH: shape}`` for a mapping of names)."""
    return parse(path, read_text(path), shape)


def read_text(path: Path) -> str:
    """The text of a conf/ file, or a ``ConfigError`` naming the missing file."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None


def parse(path: Path, text: str, shape: dict) -> tuple[dict, dict[tuple, int]]:
    """``read`` of a file's ``text`` (``path``: for the messages)."""
    try:
        node, doc = document(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    lines: dict[tuple, int] = {}
    problems: list[str] = []
    if node is not None:
        problems += twice(path, node)
        _check(path, node, shape, (), lines, problems)
    if problems:
        raise ConfigError("\n".join(problems))
    return doc or {}, lines


def document(text: str) -> tuple[yaml.Node | None, object]:
    """The node tree of one safe YAML document and the value built from it (parsed once:
    the tree gives ``twice`` and the messages their lines); raises ``yaml.YAMLError``."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        return node, (loader.construct_document(node) if node is not None else None)
    finally:
        loader.dispose()


def twice(path: Path, node, keys: tuple = ()) -> list[str]:
    """Each key written twice in one mapping anywhere in ``node``'s tree, as
    ``path:line`` problems: YAML keeps the last value and drops the first without a word."""
    out: list[str] = []
    if isinstance(node, yaml.MappingNode):
        first: dict = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is not None and key in first:
                out.append(f"{path}:{key_node.start_mark.line + 1}: key {key!r} appears twice "
                           f"in {'.'.join(keys) or 'the file'} (first on line {first[key]}); "
                           "YAML would keep only the last")
            elif key is not None:
                first[key] = key_node.start_mark.line + 1
            out += twice(path, value_node, keys + (str(key),))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value, 1):
            out += twice(path, item, keys[:-1] + (f"{keys[-1] if keys else 'item'}[{i}]",))
    return out


def _check(path: Path, node, shape, keys: tuple, lines: dict, problems: list) -> None:
    if shape is ANY:
        return
    where = ".".join(keys) or "the file"
    if shape == FREE and isinstance(node, yaml.ScalarNode) and node.value in ("", "~", "null"):
        return  # an empty mapping
    if not isinstance(node, yaml.MappingNode):
        problems.append(f"{path}:{node.start_mark.line + 1}: {where} must be a mapping of "
                        "keys to values")
        return
    if shape == FREE:  # free keys: only their lines, for the messages about their values
        for key_node, _ in node.value:
            lines[keys + (key_node.value,)] = key_node.start_mark.line + 1
        return
    known = set(shape) if not isinstance(shape, dict) else set(shape) - {EACH}
    for key_node, value_node in node.value:
        key = key_node.value
        lines[keys + (key,)] = key_node.start_mark.line + 1
        if isinstance(shape, dict) and EACH in shape:
            _check(path, value_node, shape[EACH], keys + (key,), lines, problems)
            continue
        if key not in known:
            near = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.6)
            hint = f"; did you mean {near[0]!r}?" if near else \
                f" (known: {', '.join(sorted(known))})"
            problems.append(f"{path}:{key_node.start_mark.line + 1}: unknown key {key!r} in "
                            f"{where}{hint}")
            continue
        if isinstance(shape, dict):
            _check(path, value_node, shape[key], keys + (key,), lines, problems)
