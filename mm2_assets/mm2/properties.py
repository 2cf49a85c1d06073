"""Java `.properties` syntax, read as `java.util.Properties.load` reads it.

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

import re

from mm2_assets.mm2.errors import MM2ConfigError

__all__ = ["parse_java_properties"]

_PROPERTIES_WHITESPACE = " \t\f"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _continues(line: str) -> bool:
    # An odd number of trailing backslashes continues the logical line.
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_entry(line: str) -> tuple[str, str]:
    """Split a logical line into raw key and raw value, as java.util.Properties.load does."""
    index, escaped, value_start, has_separator = 0, False, len(line), False
    while index < len(line):
        char = line[index]
        if char in "=:" and not escaped:
            value_start, has_separator = index + 1, True
            break
        if char in _PROPERTIES_WHITESPACE and not escaped:
            value_start = index + 1
            break
        escaped = char == "\\" and not escaped
        index += 1
    key = line[:index]
    while value_start < len(line):
        char = line[value_start]
        if char not in _PROPERTIES_WHITESPACE:
            if not has_separator and char in "=:":
                has_separator = True
            else:
                break
        value_start += 1
    return key, line[value_start:]


def _unescape(raw: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(raw):
        char = raw[index]
        index += 1
        if char != "\\":
            out.append(char)
            continue
        if index >= len(raw):
            break  # a dangling backslash is dropped, as Java does
        char = raw[index]
        index += 1
        if char == "u":
            digits = raw[index : index + 4]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError("malformed \\uxxxx escape")
            out.append(chr(int(digits, 16)))
            index += 4
        else:
            out.append(_ESCAPES.get(char, char))
    return "".join(out)


def parse_java_properties(text: str, source_name: str = "<string>") -> dict[str, str]:
    """Parse Java `.properties` text into a dict (later duplicates win, as in Java).

    Supports `key=value`, `key: value` and `key value`; `#`/`!` comment lines; logical lines
    continued by an odd number of trailing backslashes (leading whitespace of the next line is
    skipped); escapes `\\t \\n \\r \\f \\uXXXX` and `\\<any>` for the character itself.
    """
    result: dict[str, str] = {}
    lines = _LINE_BREAK.split(text.removeprefix("\ufeff"))
    index = 0
    while index < len(lines):
        line_number = index + 1
        line = lines[index].lstrip(_PROPERTIES_WHITESPACE)
        index += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if index >= len(lines):
                break
            line += lines[index].lstrip(_PROPERTIES_WHITESPACE)
            index += 1
        raw_key, raw_value = _split_entry(line)
        try:
            key = _unescape(raw_key)
            result[key] = _unescape(raw_value)
        except ValueError as exc:
            raise MM2ConfigError(
                f"line {line_number}: {exc}", source=source_name, key=raw_key
            ) from exc
    return result
