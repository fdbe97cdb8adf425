"""The decode job behind ``k2dec decode``, ``k2dec demo`` and the recipes.

- :mod:`~k2dec.job.driver`: methods x assignments x resources -> typed rows and a table
  (:func:`plan_methods`, :func:`run_decode`, :func:`results_table`);
- :mod:`~k2dec.job.cutset`: one method over one test set -> resumable JSONL results and icefall
  result files (:func:`decode_cuts`);
- :mod:`~k2dec.job.assets`: the model, lang dir, graphs and LMs (:func:`load_assets`).

Cuts from a folder of audio files: :func:`k2dec.data.cuts_from_audio_dir`.
"""

from .assets import GRAPH_FILES, DecodeAssets, load_assets, need_hint
from .cutset import (
    DecodeConfig,
    DecodeSummary,
    check_references,
    decode_cuts,
    dist_info,
    shard_cuts,
)
from .driver import (
    MethodRun,
    check_resources,
    plan_methods,
    results_table,
    run_decode,
    split_available,
)

__all__ = [
    "GRAPH_FILES",
    "DecodeAssets",
    "DecodeConfig",
    "DecodeSummary",
    "MethodRun",
    "check_references",
    "check_resources",
    "decode_cuts",
    "dist_info",
    "load_assets",
    "need_hint",
    "plan_methods",
    "results_table",
    "run_decode",
    "shard_cuts",
    "split_available",
]
