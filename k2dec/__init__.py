"""k2dec: k2-based FSA decoding for speech recognition.

``k2dec.Recognizer`` (:class:`k2dec.recognizer.Recognizer`) is the one-object API; the
subpackages hold the parts it is built from.
"""

from typing import Any

__version__ = "0.2.0"

__all__ = ["Recognizer", "RecognitionResult", "__version__"]


def __getattr__(name: str) -> Any:
    # imported on first use: `import k2dec` stays light (no torch, k2, lhotse)
    if name in ("Recognizer", "RecognitionResult"):
        from . import recognizer

        return getattr(recognizer, name)
    raise AttributeError(f"module 'k2dec' has no attribute {name!r}")
