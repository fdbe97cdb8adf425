"""The decode job behind ``k2dec decode``, ``k2dec demo`` and the recipes.

- :mod:`~k2dec.job.driver`: methods x assignments x resources -> typed rows and a table
  (:func:`plan_methods`, :func:`run_decode`, :func:`results_table`);
- :mod:`~k2dec.job.cutset`: one method over one test set -> resumable JSONL results and icefall
  result files (:func:`decode_cuts`: one utterance per supervision, every one recorded, the out
  dir locked), built from :mod:`~k2dec.job.config` (:class:`DecodeConfig`,
  :class:`DecodeSummary`), :mod:`~k2dec.job.checks` (:func:`check_cuts` refuses repeated
  utterance ids up front), :mod:`~k2dec.job.batches` (a batch through a method, retried cut by
  cut, silence), :mod:`~k2dec.job.resume` (what a rerun decodes again),
  :mod:`~k2dec.job.outputs` (the canonical results file, CTM files),
  :mod:`~k2dec.job.scoring` (WERs, icefall's files), :mod:`~k2dec.job.longform` (an
  utterance longer than ``segment_max`` decoded in VAD segments or windows through the same
  batches and stitched into one record in its clock) and :mod:`~k2dec.job.exports` (the
  ``--output-format`` files: SRT, WebVTT, TextGrid, word JSONL, lhotse supervisions);
- :mod:`~k2dec.job.inmemory`: one method over cuts in memory, with the job's batches and
  network pass but no files (:func:`decode_utterances`; behind :class:`k2dec.Recognizer`);
- :mod:`~k2dec.job.assets`: the model, lang dir, graphs and LMs (:func:`load_assets`);
- :mod:`~k2dec.job.settings`: settings files (``--set`` assignments per method) that
  ``k2dec decode --config`` reads;
- :mod:`~k2dec.job.tune`: picking scales and other settings on a dev set
  (:func:`tune_methods`, ``k2dec tune``).

Cuts from a folder of audio files: :func:`k2dec.data.cuts_from_audio_dir`.
"""

from .assets import (
    GRAPH_FILES,
    DecodeAssets,
    check_lm_tokens,
    check_lm_vocab,
    hypothesis_texts,
    load_assets,
    need_hint,
)
from .checks import check_cuts, check_references, warn_unknown_characters
from .config import OUTPUT_FORMATS, SEGMENTERS, DecodeConfig, DecodeSummary, dist_info
from .cutset import decode_cuts, shard_cuts
from .driver import (
    MethodRun,
    check_assets,
    check_resources,
    describe_method,
    method_table,
    plan_methods,
    results_table,
    run_decode,
    split_available,
    warn_out_of_vocabulary,
)
from .inmemory import DecodedUtterance, decode_utterances
from .settings import (
    MODEL_SETTINGS_FILE,
    DecodeSettings,
    model_settings_file,
    read_settings,
    write_settings,
)
from .tune import TuneResult, parse_grid, tune_methods, tuned_settings

__all__ = [
    "GRAPH_FILES",
    "OUTPUT_FORMATS",
    "SEGMENTERS",
    "DecodeAssets",
    "check_lm_tokens",
    "check_lm_vocab",
    "DecodeConfig",
    "DecodeSettings",
    "DecodeSummary",
    "DecodedUtterance",
    "MethodRun",
    "TuneResult",
    "check_assets",
    "check_cuts",
    "check_references",
    "check_resources",
    "decode_cuts",
    "decode_utterances",
    "dist_info",
    "hypothesis_texts",
    "load_assets",
    "describe_method",
    "method_table",
    "need_hint",
    "parse_grid",
    "plan_methods",
    "MODEL_SETTINGS_FILE",
    "model_settings_file",
    "read_settings",
    "results_table",
    "run_decode",
    "shard_cuts",
    "split_available",
    "tune_methods",
    "tuned_settings",
    "warn_out_of_vocabulary",
    "warn_unknown_characters",
    "write_settings",
]
