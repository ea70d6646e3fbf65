"""Old spellings of keyword arguments: accepted for a while, with a warning naming the new one."""
from __future__ import annotations

import warnings
from typing import Any

__all__ = ["renamed_keyword"]


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
