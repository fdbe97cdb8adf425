"""Smaller settings for the methods whose defaults take minutes on CPU even for the tiny cuts of
``decode_setup``, shared by the tests that decode every method."""

from __future__ import annotations

from k2dec.methods import override_config

#: methods whose defaults take minutes on CPU even for these cuts: smaller settings
SETTINGS = ["num_paths=20", "top_k=10", "attention_scales=0.5"]
#: and for the methods that have them (the CLI refuses settings no method has)
METHOD_SETTINGS = ["ngram_lm_scales=0.5,1.0", "lm_scales=0.5,1.0"]


def quick_config(method):
    """``method``'s default config with those of the settings above it has."""
    default = method.default_config()
    return override_config(default, [s for s in SETTINGS + METHOD_SETTINGS
                                     if has_setting(default, s)])


def has_setting(config, setting: str) -> bool:
    """Whether ``config`` has the field a ``key=value`` setting names."""
    from k2dec.methods import config_field_path

    try:
        return config_field_path(config, setting.split("=")[0]) is not None
    except ValueError:
        return False
