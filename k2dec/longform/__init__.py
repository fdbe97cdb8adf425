"""Long recordings: segmenters (a real VAD, :func:`vad_segments`; fixed windows with
overlap, :func:`window_segments`) and the stitching of per-segment hypotheses by time into one
per recording (:func:`stitch_words`, :func:`stitch_records`); a recording's transcript shared
among its segments by a first pass's words (:func:`assign_words`). Knows nothing of the
searches: the decode job decodes the segments."""

from .anchor import RunScorer, assign_words, words_by_segment
from .segments import Segment, Segmentation
from .stitch import Span, assign_spans, kept_tokens, stitch_records, stitch_words
from .vad import VAD_FRAME, VAD_RATE, VadConfig, read_blocks, speech_frames, vad_segments
from .windows import (
    WindowConfig,
    fixed_windows,
    frame_energy,
    quiet_windows,
    window_segments,
)

__all__ = [
    "VAD_FRAME",
    "VAD_RATE",
    "Segment",
    "Segmentation",
    "Span",
    "RunScorer",
    "VadConfig",
    "WindowConfig",
    "assign_spans",
    "assign_words",
    "fixed_windows",
    "frame_energy",
    "kept_tokens",
    "quiet_windows",
    "read_blocks",
    "speech_frames",
    "stitch_records",
    "stitch_words",
    "vad_segments",
    "window_segments",
    "words_by_segment",
]
