"""Old names of renamed config fields, kept as deprecated aliases (:func:`renamed_fields`: the
LM weights took icefall's names, ``lm_scale`` / ``rnn_lm_scale``): they keep their old names as
keywords and settings keys.

Version 0.2.0 dropped the rest of 0.1.0's aliases (old module paths, old parameter and class
names): the old names are errors now.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["renamed_fields"]

F = TypeVar("F", bound=Callable[..., Any])


def _renamed_parameters(**old_to_new: str) -> Callable[[F], F]:
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


def renamed_fields(**old_to_new: str) -> Callable[[type], type]:
    """Class decorator (above ``@dataclass``) for a config whose fields were renamed
    (``lm_weight="lm_scale"``): an old name stays a constructor keyword (with a
    ``DeprecationWarning``), a read-only attribute, and a ``--set`` / settings-file key
    (:func:`k2dec.methods.override_config` warns with a ``FutureWarning``, which a command
    line shows). The class's ``renamed_settings`` maps the old names to the new ones (those of
    its bases too)."""

    def deco(cls: type) -> type:
        cls.__init__ = _renamed_parameters(**old_to_new)(cls.__init__)  # type: ignore[misc]
        cls.renamed_settings = {**getattr(cls, "renamed_settings", {}), **old_to_new}
        for old, new in old_to_new.items():
            setattr(cls, old, property(lambda self, _new=new: getattr(self, _new),
                                       doc=f"The old name of ``{new}`` (deprecated)."))
        return cls

    return deco
