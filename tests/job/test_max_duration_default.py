"""``max_duration`` has one default (:data:`k2dec.primitives.sizes.MAX_DURATION`), the same in the
decode config, the command line, the Recognizer, the demo and the recipe's decode script."""

from __future__ import annotations

import inspect

from k2dec import demo
from k2dec.cli import main
from k2dec.job import DecodeConfig
from k2dec.primitives.sizes import MAX_DURATION
from k2dec.recognizer import Recognizer
from tests.recipes.scripts import recipe


def _option_default(command, name: str) -> float:
    return next(p.default for p in command.params if p.name == name)


def test_one_max_duration_default_everywhere():
    defaults = {
        "DecodeConfig": DecodeConfig().max_duration,
        "k2dec decode": _option_default(main.commands["decode"], "max_duration"),
        "k2dec tune": _option_default(main.commands["tune"], "max_duration"),
        "Recognizer": inspect.signature(Recognizer).parameters["max_duration"].default,
        "Recognizer.from_files": inspect.signature(
            Recognizer.from_files).parameters["max_duration"].default,
        "run_demo": inspect.signature(demo.run_demo).parameters["max_duration"].default,
        "tune_shipped": inspect.signature(demo.tune_shipped).parameters["max_duration"].default,
        "recipes/librispeech/decode.py": _option_default(recipe("decode"), "max_duration"),
    }
    assert defaults == dict.fromkeys(defaults, MAX_DURATION)
