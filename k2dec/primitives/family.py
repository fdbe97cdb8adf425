"""Which network output a decoding method decodes (:class:`Family`): what the model layer
(:attr:`k2dec.model.AcousticModel.capabilities`) and the method registry
(:attr:`k2dec.methods.Method.family`) both name, kept below both."""

from __future__ import annotations

import enum

__all__ = ["Family"]


class Family(str, enum.Enum):
    """Which network output a method decodes."""

    CTC = "ctc"
    TRANSDUCER = "transducer"
    AED = "aed"
