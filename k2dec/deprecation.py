"""Old keyword names of renamed parameters, kept as deprecated aliases.

Length parameters say which frames they count: ``feature_lens`` (feature frames, before the
model's subsampling), ``encoder_out_lens`` / ``log_probs_lens`` / ``memory_lens`` (frames of
that network output, after it). Functions that took a bare ``lengths`` / ``lens`` still accept
the old keyword, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["renamed_parameters"]

F = TypeVar("F", bound=Callable[..., Any])


def renamed_parameters(**old_to_new: str) -> Callable[[F], F]:
    """Decorator: a keyword argument under an old name (``lengths=``) is passed under its new
    name (``log_probs_lens=``) with a ``DeprecationWarning``; giving both is a ``TypeError``."""

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{fn.__qualname__}() got both {new}= and its old "
                                        f"name {old}=")
                    warnings.warn(f"{fn.__qualname__}({old}=...) is deprecated: the parameter "
                                  f"is now {new}", DeprecationWarning, stacklevel=2)
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return deco
