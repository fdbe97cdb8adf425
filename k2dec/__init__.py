"""k2dec: k2-based FSA decoding for speech recognition."""

__version__ = "0.1.0"
