"""Old names of renamed parameters, modules and classes, kept as deprecated aliases.

Length parameters say which frames they count: ``feature_lens`` (feature frames, before the
model's subsampling), ``encoder_out_lens`` / ``log_probs_lens`` / ``memory_lens`` (frames of
that network output, after it). Functions that took a bare ``lengths`` / ``lens`` still accept
the old keyword, with a :class:`DeprecationWarning`.

Modules renamed to say what they hold (``k2dec.paths`` -> ``k2dec.best_paths``, ...) keep
their old import path (:data:`MOVED_MODULES`), and renamed classes their old name
(:func:`renamed_attributes`); each warns once, with a :class:`DeprecationWarning` that names
the new place. Renamed settings keys are not aliased: an old key is refused with its new
name (:data:`k2dec.methods.OLD_KEYS`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

__all__ = [
    "MOVED_MODULES",
    "install_moved_modules",
    "renamed_attributes",
    "renamed_parameters",
]

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


#: Old import path -> new one of the modules renamed to say what they hold.
MOVED_MODULES: dict[str, str] = {
    "k2dec.paths": "k2dec.best_paths",
    "k2dec.lattice.confidence": "k2dec.lattice.timed_units",
    "k2dec.lattice.runner": "k2dec.lattice.parallel",
    "k2dec.methods.hotwords": "k2dec.methods.hotword_biasing",
    "k2dec.methods.transducer_lm": "k2dec.methods.transducer_beam_search",
    "k2dec.nbest.confidence": "k2dec.nbest.list_confidences",
    "k2dec.results.confidence": "k2dec.results.confidence_eval",
    "k2dec.scorers.hotwords": "k2dec.scorers.context_graph",
    "k2dec.transducer.confidence": "k2dec.transducer.joiner_confidences",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old path of :data:`MOVED_MODULES` as the new module itself (every name,
    private ones included, under both paths), warning once: a ``DeprecationWarning`` naming
    the new path, pointing at the importing line. Asked first, and only answers for those old
    paths (a stale file left at one by an older install is not imported)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a blank module, replaced in exec_module

    def exec_module(self, module: ModuleType) -> None:
        new = MOVED_MODULES[module.__name__]
        warnings.warn(f"module {module.__name__} is deprecated: it is now {new}",
                      DeprecationWarning, stacklevel=2)
        # the import system returns what sys.modules holds under the old name after this
        sys.modules[module.__name__] = importlib.import_module(new)


def install_moved_modules() -> None:
    """Make the old paths of :data:`MOVED_MODULES` importable (once per process; ``k2dec``'s
    ``__init__`` calls it)."""
    if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedModules())


def renamed_attributes(module: str, **old_to_new: str) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``module`` (the caller's ``__name__``) that serves
    each old name of a renamed attribute (``DecodeRunner="ParallelOneBestDecoder"``) as the
    new one, warning once (a ``DeprecationWarning`` naming the new name)."""

    def __getattr__(name: str) -> Any:
        if name not in old_to_new:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new = old_to_new[name]
        warnings.warn(f"{module}.{name} is deprecated: it is now {module}.{new}",
                      DeprecationWarning, stacklevel=2)
        value = getattr(sys.modules[module], new)
        setattr(sys.modules[module], name, value)  # found directly from now on: warned once
        return value

    return __getattr__
