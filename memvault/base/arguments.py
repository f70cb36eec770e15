"""The public API's arguments held to their annotations, as the CLI holds its options to theirs.

A Python caller gets what a command line user gets for a value of the wrong kind: InvalidInput in
one line, before anything is read or written. Without it `add("x", tags="alice")` stored the
tags a, l, i, c, e, and `forget(["x"])` raised a bare AttributeError from deep inside.
"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import os
import types
import typing
from collections.abc import Callable
from datetime import date, datetime
from typing import Any, TypeVar

from memvault.errors import InvalidInput

Function = TypeVar("Function", bound=Callable[..., Any])

# Generic origins that take a collection of items: a string or a mapping given there is a mistake
# (iterating "alice" gives letters, a dict its keys), never what was meant.
_COLLECTIONS = (collections.abc.Iterable, collections.abc.Sequence, collections.abc.Collection, list, tuple,
                set, frozenset)
_NAMES = {str: "a string", int: "a whole number", float: "a number", bool: "True or False", type(None): "None",
          datetime: "a datetime", date: "a date", os.PathLike: "a path", dict: "a mapping",
          collections.abc.Mapping: "a mapping", collections.abc.Callable: "a function"}

_KINDS = {str: "string", bytes: "bytes object", int: "integer", bool: "bool", dict: "dict"}


def checked(function: Function) -> Function:
    """Check each argument of `function` against its annotation on every call (InvalidInput)."""
    signature = inspect.signature(function)
    hints: dict[str, Any] = {}

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not hints:  # resolved once, at first use: the annotations are strings until then
            hints.update(_parameter_hints(function))
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:  # an unknown keyword, a missing or a surplus argument
            raise InvalidInput(f"{function.__qualname__}(): {e}") from None
        for name, value in bound.arguments.items():
            hint = hints.get(name)
            if hint is None or signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                continue
            if not accepts(hint, value):
                raise InvalidInput(_refusal(name, hint, value))
            problem = _path_problem(hint, value)
            if problem is not None:
                raise InvalidInput(f"{name} {problem}")
        return function(*args, **kwargs)

    return typing.cast(Function, call)


def _path_problem(hint: Any, value: Any) -> str | None:
    """Why a value given for a path is none: "" is no folder (it read as "no path given" and opened,
    even created, the default vault), and no path holds a NUL (ValueError from deep inside)."""
    if not isinstance(value, (str, os.PathLike)) or not any(
            (typing.get_origin(member) or member) is os.PathLike for member in _members(hint)):
        return None
    text = os.fspath(value)
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    if not text.strip():
        return "is empty"
    if "\0" in text:
        return "holds a NUL character, which no path can"
    return None


def _refusal(name: str, hint: Any, value: Any) -> str:
    message = f"{name} must be {describe(hint)}, got {shown(value)}"
    if isinstance(value, str) and _takes_items(hint) and len(value) <= 40:
        message += f" (a string is not a list: give [{value!r}])"
    return message


def _members(hint: Any) -> tuple[Any, ...]:
    """The alternatives of a union (`str | None`), or the hint alone."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _takes_items(hint: Any) -> bool:
    return any(typing.get_origin(member) in _COLLECTIONS for member in _members(hint))


def accepts(hint: Any, value: Any) -> bool:
    """Whether `value` is of a kind `hint` allows. Items are looked at in a list or a tuple; an
    iterator is left to the method, which must not find it used up."""
    for member in _members(hint):
        if member is Any or member is typing.Any:
            return True
        origin = typing.get_origin(member) or member
        if origin is None or origin is type(None):
            if value is None:
                return True
        elif origin is bool:
            if isinstance(value, bool):
                return True
        elif origin in (int, float):
            # True is no count, and a number may be whole (PEP 484: an int is a float)
            if not isinstance(value, bool) and isinstance(value, int if origin is int else (int, float)):
                return True
        elif origin is collections.abc.Callable:
            if callable(value):
                return True
        elif origin in _COLLECTIONS:
            if _is_collection(origin, member, value):
                return True
        elif isinstance(origin, type) and isinstance(value, origin):
            return True
    return False


def _is_collection(origin: type, hint: Any, value: Any) -> bool:
    if isinstance(value, (str, bytes, collections.abc.Mapping)) or not isinstance(value, origin):
        return False
    item = (typing.get_args(hint) or (Any,))[0]
    return not isinstance(value, (list, tuple)) or all(accepts(item, element) for element in value)


def describe(hint: Any) -> str:
    """The kinds a hint allows, in words: "a string or None", "a list of strings"."""
    names: list[str] = []
    for member in _members(hint):
        origin = typing.get_origin(member) or member
        if origin in _COLLECTIONS:
            item = (typing.get_args(member) or (Any,))[0]
            name = "a list" if item is Any else f"a list of {_plural(describe(item))}"
        else:
            name = _NAMES.get(origin, f"a {getattr(origin, '__name__', origin)}")
        if name not in names:
            names.append(name)
    if "a path" in names and "a string" in names:  # a path is given as text or as a Path alike
        names.remove("a string")
    if "a date" in names and "a string" in names:  # memvault.base.dates reads the text
        names = [n for n in names if n not in ("a string", "a datetime")]
        names[names.index("a date")] = "a date (a date or datetime, or text: 2026-11-01, yesterday, 7d)"
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]


def _plural(kinds: str) -> str:
    return kinds.replace("a string", "strings").replace("a mapping", "mappings").replace("a FactDraft", "FactDrafts")


def shown(value: Any) -> str:
    """The value given, with its kind, at most about 60 characters of it."""
    text = repr(value)
    text = text if len(text) <= 60 else text[:59] + "…"
    if value is None:
        return "None"
    kind = _KINDS.get(type(value)) or type(value).__name__
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}: {text}"


def _parameter_hints(function: Callable[..., Any]) -> dict[str, Any]:
    """The parameters' annotations, resolved; the return annotation is left out, so a method may
    return a type only imported for type checkers (a feature loaded when first used)."""
    parameters = {name: hint for name, hint in function.__annotations__.items() if name != "return"}
    return typing.get_type_hints(types.SimpleNamespace(__annotations__=parameters), globalns=function.__globals__)
