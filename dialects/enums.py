"""Helpers for mlfuse's enum attributes (loop iterator and index kinds, fusion group kinds).

xDSL's `EnumAttribute` holds a `StrEnum` member, so an attribute cannot hold a value
outside the enumeration, and the Python API keeps working with plain strings (a
member compares and hashes equal to its value). These helpers give both ways in one
diagnostic naming the valid values: `parse_enum_value` while parsing (an error
located at the value) and `enum_value` for Python builders (a ValueError).
"""

from __future__ import annotations

from typing import TypeVar

from xdsl.parser import AttrParser
from xdsl.utils.str_enum import StrEnum

E = TypeVar("E", bound=StrEnum)


def expected_values(enum_type: type[StrEnum]) -> str:
    """ "parallel or reduction", or "one of loop, stitch, ..." for longer enumerations."""
    values = [str(v) for v in enum_type]
    if len(values) == 2:
        return " or ".join(values)
    return "one of " + ", ".join(values)


def parse_enum_value(parser: AttrParser, enum_type: type[E], what: str) -> E:
    """A member of `enum_type` written as an identifier or a quoted string."""
    pos = parser.pos
    value = parser.parse_optional_identifier_or_str_literal()
    if value is None or value not in {str(v) for v in enum_type}:
        got = f", got '{value}'" if value is not None else ""
        parser.raise_error(f"{what} must be {expected_values(enum_type)}{got}", pos)
    return enum_type(value)


def enum_value(enum_type: type[E], value: str, what: str) -> E:
    """`value` (a string or a member) as a member of `enum_type`, else a ValueError."""
    try:
        return enum_type(value)
    except ValueError:
        raise ValueError(f"{what} must be {expected_values(enum_type)}, got {value!r}") from None
