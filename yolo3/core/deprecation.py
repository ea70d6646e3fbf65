"""Old spellings of keyword arguments: accepted for a while, with a warning naming the new one."""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, TypeVar

__all__ = ["renamed_keyword", "accepts_old_keywords"]

F = TypeVar("F", bound=Callable[..., Any])


def renamed_keyword(new_name: str, new_value: Any, old_name: str, old_value: Any,
                    stacklevel: int = 3) -> Any:
    """The value of keyword ``new_name``, or of its old spelling ``old_name`` (which warns with a
    :class:`DeprecationWarning`); both given is a :class:`TypeError`."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise TypeError(f"give {new_name}= only ({old_name}= is its old spelling)")
    warnings.warn(f"{old_name}= is now {new_name}= (the old spelling will go in a later release)",
                  DeprecationWarning, stacklevel=stacklevel)
    return old_value


def accepts_old_keywords(**new_name_of: str) -> Callable[[F], F]:
    """Decorate a function so that each old keyword (``model_type="variant"``: old=new) is taken
    as its new one, through :func:`renamed_keyword`; the function itself knows only the new names."""
    def decorate(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            for old, new in new_name_of.items():
                if old in kwargs:
                    kwargs[new] = renamed_keyword(new, kwargs.get(new), old, kwargs.pop(old),
                                                  stacklevel=4)
            return function(*args, **kwargs)
        return wrapper  # type: ignore[return-value]
    return decorate
