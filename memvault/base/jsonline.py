"""One line of JSON input (`add --stdin`, `search --stdin`), read without an internal error.

Besides a JSONDecodeError, json.loads fails in two ways on input a producer never means: nesting
deeper than Python's recursion limit (RecursionError) and a whole number longer than Python will
convert (a ValueError past 4300 digits, a guard against quadratic-time int parsing).
"""

from __future__ import annotations

import json
import sys


class TooDeep(ValueError):
    """JSON nested deeper than the parser can follow."""


def loads(line: str) -> object:
    """json.loads for one line; raises json.JSONDecodeError or TooDeep."""
    try:
        return json.loads(line, parse_int=_whole_number)
    except RecursionError:
        raise TooDeep("nested too deeply") from None


def _whole_number(digits: str) -> int | float:
    # Past the limit the number is read as a float (inf beyond 1e308): still a number, so it meets
    # the same range checks as any other (importance, limit) instead of int()'s ValueError.
    limit = sys.get_int_max_str_digits()
    if limit and len(digits.lstrip("-")) > limit:
        return float(digits)
    return int(digits)
