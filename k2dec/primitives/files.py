"""Reading input files with errors that name them: text files (lexicons, symbol tables, ARPA
files) and torch-saved files (graphs, checkpoints).

Python's own errors for a gzipped or non-UTF-8 file (``UnicodeDecodeError: 'utf-8' codec can't
decode byte 0x8b in position 1``) name neither the file nor the line, and ``torch.load`` of a
truncated or foreign file raises ``UnpicklingError``/``EOFError``/``RuntimeError`` without the
file name; these helpers raise ``ValueError`` naming the file (and line). Gzip-compressed text
(``.gz`` or not) is read transparently; the one place that opens gzip files (reading,
decompressing for plain-text readers such as kaldilm, writing ``.gz`` outputs). Nothing here
imports the rest of k2dec.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import pickle
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["UnsafeFileError", "checked_config", "copy_as", "is_gzip", "load_checked_state",
           "load_torch_file", "plain_file", "read_text", "text_lines"]

logger = logging.getLogger(__name__)

_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = "\ufeff"


def is_gzip(path: str | Path) -> bool:
    """Whether ``path`` starts with the gzip magic bytes."""
    with open(path, "rb") as f:
        return f.read(2) == _GZIP_MAGIC


@contextlib.contextmanager
def plain_file(path: str | Path, what: str) -> Iterator[Path]:
    """``path`` itself, or for a gzip-compressed file (by its first bytes, whatever its name)
    an uncompressed copy in a temporary directory, removed on exit: for readers that take
    plain files only (kaldilm).

    Raises:
      ValueError: naming ``what`` and the file for a corrupt gzip stream.
    """
    path = Path(path)
    if not is_gzip(path):
        yield path
        return
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / (path.stem if path.suffix == ".gz" else path.name)
        try:
            with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst)
        except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
            raise ValueError(f"{path}: cannot decompress {what}: {e}") from None
        yield plain


def copy_as(src: str | Path, dst: str | Path) -> Path:
    """Copy the plain file ``src`` to ``dst``, gzip-compressed when ``dst``'s name ends in
    ``.gz``, through ``dst.partial`` (an interrupted copy never leaves a truncated
    ``dst``). Returns ``dst``."""
    dst = Path(dst)
    partial = dst.with_name(dst.name + ".partial")
    opener = gzip.open if dst.suffix == ".gz" else open
    with open(src, "rb") as f, opener(partial, "wb") as g:
        shutil.copyfileobj(f, g)
    partial.replace(dst)
    return dst


def text_lines(path: str | Path, what: str) -> Iterator[tuple[int, str]]:
    """``(line_number, line)`` pairs (from 1, newline kept) of a UTF-8 text file, gunzipped
    on the fly when it is gzip-compressed. A UTF-8 byte-order mark at the start (what some
    Windows editors write) is dropped with a logged warning, so it does not become part of
    the first symbol or word.

    Args:
      path: the file.
      what: what the file should be (``"lexicon"``, ``"ARPA file"``, ...), for messages.

    Raises:
      ValueError: naming ``what`` and the file for a missing file, a directory, a file that
        is not UTF-8 text (with the line), or a corrupt gzip stream.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{what} {path} does not exist")
    if not path.is_file():
        raise ValueError(f"{what} {path} is not a file")
    compressed = is_gzip(path)
    opener = gzip.open if compressed else open
    try:
        with opener(path, "rb") as f:
            for lineno, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ValueError(f"{path}:{lineno}: {what} is not UTF-8 text ({e.reason} "
                                     f"at byte {e.start} of the line)") from None
                if "\x00" in line:
                    raise ValueError(f"{path}:{lineno}: {what} has NUL bytes (a binary file?)")
                if lineno == 1 and line.startswith(_UTF8_BOM):
                    logger.warning("%s: ignoring the UTF-8 byte-order mark at its start", path)
                    line = line[len(_UTF8_BOM):]
                yield lineno, line
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
        raise ValueError(f"{path}: cannot read {what}: {e}") from None


def read_text(path: str | Path, what: str) -> str:
    """The whole text of a UTF-8 (optionally gzipped) file, with the errors and the
    byte-order-mark handling of :func:`text_lines`."""
    return "".join(line for _, line in text_lines(path, what))


#: the only globals a k2dec torch file may name (module, name): tensors, their storages (torch
#: resolves ``torch.*Storage`` itself), ordered dicts, dtypes/sizes, torch's version string
#: (graph metadata) and k2's ragged tensors (a graph's ragged ``aux_labels``).
_SAFE_GLOBALS = frozenset({
    ("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_parameter"),
    ("torch._utils", "_rebuild_tensor"), ("collections", "OrderedDict"),
    ("torch", "Size"), ("torch.torch_version", "TorchVersion"), ("_k2.ragged", "RaggedTensor"),
    ("builtins", "set"), ("builtins", "frozenset"),
})


class UnsafeFileError(ValueError):
    """A torch file that names a global outside :data:`_SAFE_GLOBALS` (loading it would run
    or import code)."""


def _restricted_pickle_module(path: Path, what: str) -> Any:
    """A ``pickle_module`` for ``torch.serialization._load`` whose unpickler resolves only
    :data:`_SAFE_GLOBALS` and torch dtypes: the weights-only loading of torch >= 2, which
    torch 1.13's ``weights_only=True`` cannot do for k2dec's files (it refuses every Python
    float, so a checkpoint's config) and which its ``pickle_module`` argument cannot replace
    (torch 1.13 ignores it without ``weights_only``)."""
    import types

    import torch

    class Unpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            if (module, name) in _SAFE_GLOBALS:
                return super().find_class(module, name)
            if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
                return getattr(torch, name)
            raise UnsafeFileError(
                f"{what} {path} holds a {module}.{name} object; k2dec loads only tensors and "
                "plain data (unpickling other objects can run code). If you trust the file, "
                "load it with torch.load(..., weights_only=False) and save its tensors and "
                "plain values again")

    return types.SimpleNamespace(Unpickler=Unpickler, load=pickle.load)


def _safe_torch_load(path: Path, what: str) -> Any:
    """The object of a torch zip file (what ``torch.save`` writes since torch 1.6), unpickled
    with :func:`_restricted_pickle_module`, tensors on CPU."""
    from torch import serialization as ser

    with open(path, "rb") as f:
        if not ser._is_zipfile(f):
            raise ValueError("not a torch zip archive (torch.save's format)")
        with ser._open_zipfile_reader(f) as archive:
            if ser._is_torchscript_zip(archive):
                raise UnsafeFileError(
                    f"{what} {path} is a TorchScript archive (a program), not saved tensors; "
                    "a TorchScript model is loaded as a model (--model / load_model)")
            return ser._load(archive, "cpu", _restricted_pickle_module(path, what),
                             encoding="utf-8")


def load_torch_file(path: str | Path, what: str, keys: tuple[str, ...] = ()) -> Any:
    """The tensors and plain data (dicts, lists, numbers, strings) a ``torch.save`` file
    holds, loaded on CPU without unpickling anything else (as ``torch.load(path,
    weights_only=True)``, see :func:`_restricted_pickle_module`), with errors that name the
    file.

    Args:
      path: the file.
      what: what it should be (``"graph file"``, ``"model file"``, ...), for messages.
      keys: when given, the file must hold a dict with these keys.

    Raises:
      ValueError: a missing file, a directory, an empty, truncated or corrupt file, a file
        torch cannot read (not a torch-saved object: text, gzip, ...), a file holding other
        objects than tensors and plain data (:class:`UnsafeFileError`), or a missing key.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{what} {path} does not exist")
    if not path.is_file():
        raise ValueError(f"{what} {path} is not a file")
    if path.stat().st_size == 0:
        raise ValueError(f"{what} {path} is empty")
    try:
        obj = _safe_torch_load(path, what)
    except UnsafeFileError:
        raise
    except (pickle.UnpicklingError, EOFError, RuntimeError, OSError, ValueError, TypeError,
            AttributeError, ImportError, IndexError, KeyError, UnicodeDecodeError) as e:
        raise ValueError(f"{what} {path} cannot be read ({_unreadable_kind(path, e)}?): "
                         f"{type(e).__name__}: {str(e)[:200]}") from None
    if keys:
        if not isinstance(obj, dict):
            raise ValueError(f"{what} {path} holds a {type(obj).__name__}, expected a dict "
                             f"with {', '.join(keys)}")
        missing = [k for k in keys if k not in obj]
        if missing:
            raise ValueError(f"{path} is not a {what} (no {', '.join(missing)}; keys: "
                             f"{', '.join(map(str, list(obj)[:10]))})")
    return obj


def _unreadable_kind(path: Path, err: Exception) -> str:
    """What an unreadable torch file probably is, for the message."""
    if is_gzip(path):
        return "gzip-compressed"
    with open(path, "rb") as f:
        zipped = f.read(4) == b"PK\x03\x04"
    if zipped and isinstance(err, RuntimeError | EOFError | pickle.UnpicklingError):
        return "a torch archive, truncated or corrupt"
    return "not a torch-saved file"


def checked_config(config_cls: type, values: Any, path: str | Path) -> Any:
    """``config_cls(**values)`` for the config stored in the checkpoint ``path``: a
    ``ValueError`` naming the file when ``values`` is not a dict of the config's fields or
    the config refuses them (``config_cls`` may nest dataclasses given as dicts)."""
    if not isinstance(values, dict):
        raise ValueError(f"{path}: its model_config is a {type(values).__name__}, not a dict")
    try:
        return config_cls(**values)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: its model_config does not fit {config_cls.__name__}: "
                         f"{e}") from None


def load_checked_state(module: Any, state: Any, path: str | Path) -> None:
    """``module.load_state_dict(state)`` (floating tensors cast to float32) with a
    ``ValueError`` naming the checkpoint ``path`` for missing, unexpected or misshapen
    weights, weights that are not finite, or a tensor that is not floating (int32, bool,
    complex, ...) where the module has a floating one (``load_state_dict`` would cast it
    and the model decode garbage)."""
    import torch

    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor)
                                              for v in state.values()):
        raise ValueError(f"{path}: its weights are not a dict of tensors")
    _check_weight_dtypes(module, state, path)
    bad = [k for k, v in state.items() if v.is_floating_point() and
           not bool(torch.isfinite(v).all())]
    if bad:
        raise ValueError(f"{path}: weights {bad[:3]} are not finite (NaN/inf)")
    try:
        module.load_state_dict({k: v.float() if v.is_floating_point() else v
                                for k, v in state.items()})
    except RuntimeError as e:
        raise ValueError(f"{path}: its weights do not fit the model its config describes: "
                         f"{str(e).strip()[:300]}") from None


def _check_weight_dtypes(module: Any, state: dict, path: str | Path) -> None:
    """Refuse a non-floating tensor in ``state`` where ``module``'s tensor of that name is
    floating, naming the tensor and its dtype."""
    own = module.state_dict()
    for name, value in state.items():
        target = own.get(name)
        if target is not None and target.is_floating_point() and not value.is_floating_point():
            raise ValueError(
                f"{path}: weight {name!r} has dtype {value.dtype}, expected a floating dtype "
                f"(float32/float16/bfloat16, as the model's {target.dtype}); a checkpoint with "
                "integer or complex weights is not a trained model (re-export it)")
