"""A model's own settings file (decode.json beside it) is applied by ``k2dec decode`` and
``k2dec tune`` when no ``--config`` is given, said in one line; ``--no-model-settings`` and
``--config`` leave it out."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from k2dec.cli import main
from k2dec.job import model_settings_file


def _setup(s, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    model = folder / "model.pt"
    shutil.copy(s["model_path"], model)
    settings = folder / "decode.json"
    settings.write_text(json.dumps({"set": [], "methods": {
        "attention-decoder": ["attention_scale=0.7", "ngram_lm_scale=0.4"]}}))
    return model, settings


def _decode(s, model, out, *extra):
    """Decode the fixture's cuts (exit 3: its too-short cut utt5 fails in every job)."""
    return CliRunner().invoke(main, [
        "decode", "--cuts", str(s["cuts_path"]), "--model", str(model), "--lang-dir",
        str(s["lang_dir"]), "--out-dir", str(out), "--method", "attention-decoder", *extra])


def test_the_models_settings_file_is_applied_and_said(decode_setup, tmp_path):
    s = decode_setup
    model, settings = _setup(s, tmp_path)
    assert model_settings_file(model) == settings
    assert model_settings_file(s["model_path"]) is None
    r = _decode(s, model, tmp_path / "a")
    assert r.exit_code == 3, r.output
    assert r.output.count(f"applying the model's settings file {settings}") == 1
    assert "ngram_lm_scale_0.4_attention_scale_0.7" in r.output
    # opted out: icefall's defaults, nothing said
    r = _decode(s, model, tmp_path / "b", "--no-model-settings")
    assert r.exit_code == 3, r.output
    assert "applying" not in r.output
    assert "ngram_lm_scale_1.3_attention_scale_1.2" in r.output
    # --config wins over the model's file
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"methods": {"attention-decoder": ["attention_scale=0.5"]}}))
    r = _decode(s, model, tmp_path / "c", "--config", str(other))
    assert r.exit_code == 3, r.output
    assert "applying" not in r.output
    assert "ngram_lm_scale_1.3_attention_scale_0.5" in r.output
    # a model without a settings file: nothing said
    r = _decode(s, s["model_path"], tmp_path / "d")
    assert r.exit_code == 3 and "applying" not in r.output


def test_a_broken_settings_file_beside_the_model_is_named(decode_setup, tmp_path):
    s = decode_setup
    model, settings = _setup(s, tmp_path)
    settings.write_text("{not json")
    r = _decode(s, model, tmp_path / "a")
    assert r.exit_code == 2 and str(settings) in r.output
    assert _decode(s, model, tmp_path / "b", "--no-model-settings").exit_code == 3
