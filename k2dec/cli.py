"""The ``k2dec`` command. Thin: every subcommand forwards to the library."""

from __future__ import annotations

import logging
import math
import os
import sys
from pathlib import Path

import click

from . import __version__
from .primitives.sizes import MAX_DURATION


class _Number(click.FloatRange):
    """A finite float option within optional bounds: the one type of every float option, so
    ``nan`` (which compares false with both bounds, and so passed ``click.FloatRange``),
    ``inf`` and out-of-range values are refused naming the option, never a config field."""

    name = "number"

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return rv


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="k2dec")
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
def main(verbose: bool) -> None:
    """k2dec: k2-based FSA decoding for speech recognition."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@main.command("prepare-lang")
@click.option("--lang-dir", required=True, type=click.Path(path_type=Path),
              help="Output lang dir (icefall layout).")
@click.option("--lexicon", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A lexicon.txt (word tok1 tok2 ...) to use as is (not Kaldi's lexiconp.txt: "
                   "no probabilities); with --bpe-model its tokens must be the model's pieces.")
@click.option("--words", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A word list, a text or a words.txt, whose words are spelled with CMUdict "
                   "(phones) or --bpe-model.")
@click.option("--bpe-model", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="sentencepiece model: build a BPE lang dir (tokens = its pieces).")
@click.option("--sil-token", default=None,
              help="Optional silence token between words (e.g. SIL); none by default.")
@click.option("--sil-prob", default=0.5, show_default=True,
              type=_Number(0, 1, min_open=True, max_open=True),
              help="Probability of the optional silence.")
@click.option("--allow-oov", is_flag=True,
              help="With --words and CMUdict: skip words CMUdict lacks instead of failing.")
def prepare_lang(lang_dir, lexicon, words, bpe_model, sil_token, sil_prob, allow_oov):
    """Write tokens.txt, words.txt, lexicon(_disambig).txt, L.pt and L_disambig.pt."""
    from .graph import write_lexicon_graphs
    from .lang import prepare_lexicon, write_lang_dir

    if sum(x is not None for x in (lexicon, words)) != 1:
        raise click.UsageError("give exactly one of --lexicon and --words")
    src = _checked(prepare_lexicon, lexicon, words, bpe_model, allow_oov)
    lang = _checked(write_lang_dir, lang_dir, src.lexicon, tokens=src.tokens, blank=src.blank)
    _checked(write_lexicon_graphs, lang.path, sil_token=sil_token, sil_prob=sil_prob)
    click.echo(f"wrote {lang.path} ({len(lang.token_table)} tokens, "
               f"{len(lang.word_table)} words)")


@main.command("compile-graph")
@click.option("--lang-dir", required=True, type=click.Path(exists=True, file_okay=False,
                                                           path_type=Path),
              help="The lang dir (tokens.txt, words.txt, lexicon*.txt); only read when "
                   "--graph-dir is given.")
@click.option("--type", "graph_type", required=True,
              type=click.Choice(["H", "L", "HL", "HLG", "LG", "G"]),
              help="Which graph; G is the rescoring G (G_4_gram.pt) of nbest-rescoring, "
                   "whole-lattice-rescoring and attention-decoder.")
@click.option("--arpa", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="ARPA n-gram LM, plain or gzipped (.arpa.gz); needed for HLG, LG and G "
                   "(for G usually a 4-gram).")
@click.option("--max-order", default=-1, show_default=True, type=int,
              help="Use n-grams up to this order (-1: all).")
@click.option("--modified-ctc", is_flag=True, help="Use the modified CTC topology for H.")
@click.option("--minimize", is_flag=True,
              help="HL, HLG, LG: merge the states that have the same future (same paths, "
                   "words and scores in a smaller graph).")
@click.option("--graph-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write the graph here (and L.pt / L_disambig.pt when they must be built) "
                   "instead of into the lang dir; k2dec decode --graph-dir reads it.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Output file (default: <graph-dir or lang-dir>/<TYPE>.pt; G_4_gram.pt "
                   "for G); never one of the inputs (the ARPA file, the lang dir's tables).")
def compile_graph_cmd(lang_dir, graph_type, arpa, max_order, modified_ctc, minimize, graph_dir,
                      out):
    """Compile H, L, HL, HLG, LG or the rescoring G for a lang dir and save it with
    metadata (the lang dir's symbol tables); print its size and the lexicon words on no
    arc."""
    from .graph import check_lang_graph, compile_graph

    _not_an_input(out, [arpa] + [lang_dir / n for n in _LANG_INPUTS])
    graph, path = _checked(compile_graph, lang_dir, graph_type, arpa, max_order, modified_ctc,
                           out, graph_dir=graph_dir, minimize=minimize)
    check = check_lang_graph(graph, graph_type, lang_dir)
    what = (check.describe() if graph_type != "H"  # H has tokens, no words
            else f"{check.num_states} states, {check.num_arcs} arcs")
    click.echo(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB): {what}")


#: The files of a lang dir that commands read (an output path must never be one of them).
_LANG_INPUTS = ("tokens.txt", "words.txt", "lexicon.txt", "lexicon_disambig.txt", "bpe.model")


def _not_an_input(out: Path | None, inputs) -> None:
    """A usage error when the output file ``out`` is one of the ``inputs`` (paths or None):
    writing it would destroy what the command reads."""
    if out is None:
        return
    real = out.resolve()
    for p in inputs:
        if p is not None and Path(p).resolve() == real:
            raise click.UsageError(f"the output {out} is the input {p}: it would be "
                                   "overwritten; write the output to another file")


@main.command("draw-graph")
@click.argument("graph", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", required=True, type=click.Path(path_type=Path),
              help="Output image: .svg, .png or .pdf.")
@click.option("--lang-dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Show symbols from this lang dir instead of ids.")
@click.option("--max-arcs", default=2000, show_default=True, type=click.IntRange(min=1),
              help="Refuse graphs bigger than this.")
def draw_graph_cmd(graph, out, lang_dir, max_arcs):
    """Draw a small saved graph (GRAPH is a .pt file) with graphviz (its `dot` program must
    be installed: apt-get install graphviz)."""
    from .graph import GraphvizNotFound, draw_graph, load_graph
    from .lang import LangDir

    tokens = words = None
    if lang_dir is not None:
        lang = LangDir(lang_dir)
        tokens, words = _checked(lambda: (lang.token_table, lang.word_table))
    fsa = _checked(load_graph, graph, tokens, words)
    try:
        path = _checked(draw_graph, fsa, out, title=graph.stem, token_table=tokens,
                        word_table=words, max_arcs=max_arcs)
    except GraphvizNotFound as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"wrote {path}")


def _feature_options(fn):
    """``--feature-<field>`` for every :class:`k2dec.data.FeatureConfig` field (a model
    trained with other features than icefall's)."""
    import dataclasses

    from .data import FeatureConfig

    for f in reversed(dataclasses.fields(FeatureConfig)):
        name = "--feature-" + f.name.replace("_", "-")
        default = f.default
        if isinstance(default, bool):
            opt = click.option(f"{name}/{name.replace('--feature-', '--feature-no-')}",
                               f"feature_{f.name}", default=None,
                               help=f"Features: {f.name} (default {default}).")
        else:
            kind = _Number() if isinstance(default, float) else type(default)
            opt = click.option(name, f"feature_{f.name}", type=kind, default=None,
                               help=f"Features: {f.name} (default {default}).")
        fn = opt(fn)
    return fn


def _feature_changes(features: dict) -> dict:
    """The ``--feature-*`` values given, by FeatureConfig field (BadParameter if invalid)."""
    from .data import FeatureConfig

    changes = {k[len("feature_"):]: v for k, v in features.items() if v is not None}
    try:
        FeatureConfig().override(**changes)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--feature-*") from None
    return changes


def _options(*options):
    """A decorator adding ``options`` (``click.option`` decorators) in the given order."""
    def deco(fn):
        for opt in reversed(options):
            fn = opt(fn)
        return fn
    return deco


#: --cuts / --audio-dir / --text / --test-set: the utterances to decode.
_input_options = _options(
    click.option("--cuts", "cuts_path",
                 type=click.Path(exists=True, dir_okay=False, path_type=Path),
                 help="A lhotse CutSet manifest with fbank features (e.g. from the "
                      "recipe)."),
    click.option("--audio-dir", type=click.Path(exists=True, file_okay=False,
                                                path_type=Path),
                 help="Or: a folder of audio files (.wav .flac .mp3 .ogg .opus and more, "
                      "any case, any depth; any sampling rate and channel count); the "
                      "utterance id is the file stem. References: --text, else the "
                      "folder's *.trans.txt files."),
    click.option("--text", "text_path",
                 type=click.Path(exists=True, dir_okay=False, path_type=Path),
                 help="With --audio-dir: references as a Kaldi text file (<utt-id> "
                      "WORDS... per line, utt-id = file stem); WER and icefall result "
                      "files follow."),
    click.option("--test-set", default=None, help="Name used in result files (default: "
                 "from the manifest or folder name)."),
)


#: --model / --lang-dir / --graph-dir / --rnn-lm / --hotwords / --lodr-arpa / --feature-*:
#: what decoding needs besides the cuts.
_asset_options = _options(
    click.option("--model", "model_path", type=click.Path(exists=True, path_type=Path),
                 help="A k2dec model file, an icefall TorchScript export (jit_script.pt, "
                      "cpu_jit.pt, jit_script_chunk_*.pt) or a sherpa-onnx folder / .onnx "
                      "file; required."),
    click.option("--lang-dir", type=click.Path(exists=True, file_okay=False,
                                               path_type=Path),
                 help="Lang dir with tokens.txt, words.txt, bpe.model (and graphs, unless "
                      "--graph-dir has them); only read. Without it, tokens.txt / bpe.model "
                      "beside the model are used."),
    click.option("--graph-dir", type=click.Path(exists=True, file_okay=False,
                                                path_type=Path),
                 help="Where HLG.pt, LG.pt, G_4_gram.pt are (k2dec compile-graph "
                      "--graph-dir); looked for before the lang dir."),
    click.option("--rnn-lm", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                 help="A neural LM (k2dec train-lm / export-lm) for rnn-lm / multi-pass and "
                      "the LM-fusion searches."),
    click.option("--hotwords", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                 help="Hotwords to bias towards (one phrase per line, optionally "
                      "'PHRASE :SCORE'); used by the methods that support biasing (column "
                      "'hotwords' of --list-methods: the transducer, CTC prefix and attention "
                      "searches, the fast_beam_search family, the HLG methods), with --set "
                      "hotwords.token_score=... (default 1.0 per token) or "
                      "word_hotwords.word_score=... (the HLG methods: default 2.0 per word, "
                      "phrases must be in words.txt). "
                      "Token-level methods pay half of it while a phrase is incomplete and "
                      "complete phrases at word ends (--set hotwords.partial_share=1.0 --set "
                      "hotwords.whole_words=false, "
                      "or --icefall-compat, for icefall's scheme and its 2.0)."),
    click.option("--lodr-arpa", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                 help="A token n-gram ARPA (words = token ids or BPE pieces, plain or "
                      "gzipped) for the LODR methods: k2dec train-token-lm makes one."),
    _feature_options,
)


#: --method / --set / --config / --max-duration / --icefall-compat / --threads: the methods
#: and how they run.
_method_options = _options(
    click.option("--method", "methods", multiple=True,
                 help="Decoding method (repeatable); see `k2dec decode --list-methods`."),
    click.option("--set", "assignments", multiple=True,
                 help="Override a setting, PART.FIELD=VALUE (e.g. search.beam_size=8, "
                      "lattice.search_beam=15, rescore.ngram_lm_scale=0.5, "
                      "fusion.lm_scale=0.3), in every given method that has it; a bare "
                      "FIELD works where one part of the method has it (num_paths=50: "
                      "nbest.num_paths). A key means the same in every method "
                      "(beam_size: hypotheses kept; beam: a pruning beam); "
                      "METHOD:KEY=VALUE sets it for one method. A key of k2dec 0.1 is "
                      "refused with its new name. --list-methods and --describe show each "
                      "method's settings by part. Applied after --config."),
    click.option("--config", "config_path",
                 type=click.Path(exists=True, dir_okay=False, path_type=Path),
                 help="A settings file (JSON; written by k2dec tune): KEY=VALUE "
                      "assignments for every method and per method."),
    click.option("--no-model-settings", is_flag=True,
                 help="Do not apply the model's own settings file (decode.json beside the "
                      "model, e.g. the shipped model's tuned scales), which is applied when no "
                      "--config is given."),
    click.option("--max-duration", default=MAX_DURATION, show_default=True,
                 type=_Number(min=0.0, min_open=True, max=100_000.0),
                 help="Seconds of audio per batch (> 0); a longer recording is a failed cut "
                      "(decode: unless it is longer than --segment-max: then it is decoded "
                      "in segments)."),
    click.option("--icefall-compat", is_flag=True,
                 help="icefall's choices where k2dec's defaults differ: no termination frame "
                      "in fast_beam_search, ILME 0.1 in fast_beam_search_nbest/_oracle, the "
                      "last of equal n-best scores, float32 scores in modified_beam_search "
                      "(fields not given with --set; see k2dec.methods.compat)."),
    click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1),
                 help="torch threads."),
)


def _settings_path(config_path, model_path, no_model_settings):
    """``--config``, else the model's own settings file (said in one line) unless
    ``--no-model-settings``."""
    from .job import model_settings_file

    if config_path is not None or no_model_settings or model_path is None:
        return config_path
    found = model_settings_file(model_path)
    if found is not None:
        click.echo(f"applying the model's settings file {found} (--no-model-settings: "
                   "without it)", err=True)
    return found


def _plan(methods, assignments, config_path, icefall_compat=False):
    """The method runs of the command line (UsageError on any problem)."""
    from .job import MethodRun, plan_methods, read_settings

    if not methods:
        raise click.UsageError("give at least one --method (see k2dec decode --list-methods)")
    settings = _checked(read_settings, config_path) if config_path is not None else None
    runs = _checked(plan_methods, methods, assignments, settings=settings)
    if icefall_compat:
        from .methods import icefall_compatible

        runs = [MethodRun(r.method, icefall_compatible(r.method, r.config)) for r in runs]
    return runs


def _load_job(runs, cuts_path, audio_dir, text_path, model_path, lang_dir, graph_dir, rnn_lm,
              hotwords, lodr_arpa, feature_changes):
    """Check the inputs, load the assets and check that they serve every method, and load
    the references of an audio folder: ``(assets, references or None)``. Every problem
    found is reported together, before any feature is computed."""
    from .data import load_references, scan_audio_dir
    from .job import check_assets, check_references, load_assets

    if model_path is None:
        raise click.UsageError("--model is required")
    if (cuts_path is None) == (audio_dir is None):
        raise click.UsageError("give exactly one of --cuts and --audio-dir")
    if text_path is not None and audio_dir is None:
        raise click.UsageError("--text goes with --audio-dir (a --cuts manifest carries its "
                               "references)")
    assets = _checked(load_assets, model_path, lang_dir,
                      lm_paths={"rnn_lm": rnn_lm} if rnn_lm is not None else None,
                      hotwords=hotwords, lodr_arpa=lodr_arpa, feature_overrides=feature_changes,
                      graph_dir=graph_dir)
    problems, refs = [], None
    unsupported = [r.method.name for r in runs if not assets.model.supports(r.method)]
    if unsupported:
        problems.append(f"{', '.join(unsupported)}: not for this model "
                        f"({assets.model.describe()}); see --list-methods --model")
    try:
        check_assets([r for r in runs if r.method.name not in unsupported], assets)
    except ValueError as e:
        problems.append(str(e))
    if audio_dir is not None:  # the references of the files to come, before their features
        refs = _checked(load_references, audio_dir, text_path)
        utts = _checked(scan_audio_dir, audio_dir).ids
        try:
            check_references([r.method for r in runs], {u: refs.get(u) for u in utts})
        except ValueError as e:
            problems.append(str(e))
    if problems:
        raise click.UsageError("; ".join(problems))
    return assets, refs


def _load_cuts(cuts_path, audio_dir, refs, test_set, feature_dir, runs, extractor,
               max_duration, shard=""):
    """``(test-set name, cuts, {utt id: why unusable})`` from --cuts or --audio-dir; features
    an audio folder or a manifest's cuts of recordings lack are computed into
    ``feature_dir/<name><shard>`` by ``extractor``, each recording checked from its header
    first (at most ``max_duration`` seconds; 0: any length, as ``k2dec decode`` takes: the
    job decodes a long one in segments); the cuts' references are checked against what
    ``runs`` need."""
    from .data import (
        AudioLimits,
        compute_cut_features,
        cuts_from_audio_dir,
        load_cuts,
        safe_name,
        split_bad_cuts,
    )
    from .job import check_cuts
    from .job.checks import check_names
    from .results.paths import MAX_TEST_SET_BYTES, job_folder, path_component

    limits = AudioLimits(max_duration=max_duration) if max_duration > 0 else AudioLimits()
    name = test_set if test_set is not None else safe_name(
        cuts_path.name.split(".")[0].replace("librispeech_cuts_", "")
        if cuts_path is not None else audio_dir.name)
    if test_set is not None or set(name) == {"."}:  # one file-name component ("%2E." for "..")
        name = _checked(path_component, name, "--test-set", MAX_TEST_SET_BYTES)
    _checked(check_names, name)  # a long folder name: give --test-set
    features = _job_errors(job_folder, _job_errors(job_folder, feature_dir) / f"{name}{shard}")
    if cuts_path is not None:  # a cut whose fields cannot be decoded fails alone
        cuts, unusable = _checked(split_bad_cuts, _checked(load_cuts, cuts_path))
        if not all(c.has_features for c in cuts):
            cuts, unreadable = _checked(compute_cut_features, cuts, features,
                                        extractor=extractor, limits=limits)
            unusable |= unreadable
    else:
        audio = _checked(cuts_from_audio_dir, audio_dir, features,
                         references=refs, extractor=extractor, limits=limits)
        cuts, unusable = audio.cuts, audio.failures
    _checked(check_cuts, [r.method for r in runs], cuts)
    return name, cuts, unusable


def _verbose(ctx: click.Context, verbose: bool) -> None:
    """``decode -v``: log at INFO level and remember it for ``--list-methods``."""
    if verbose:
        ctx.meta["k2dec.verbose"] = True
        logging.getLogger().setLevel(logging.INFO)


def _is_verbose() -> bool:
    """``-v`` given to ``k2dec`` or to the command."""
    ctx = click.get_current_context()
    return bool(ctx.meta.get("k2dec.verbose") or ctx.find_root().params.get("verbose"))


def _list_methods(model_path, lang_dir, feature_changes) -> None:
    """Print the method table (lines of at most 100 columns; with ``-v`` every method's
    settings too): every registered method, or those ``model_path`` supports."""
    from .job import method_table
    from .methods import family_order, list_methods, supported_methods
    from .model import load_model

    if model_path is None:
        methods = list_methods()
    else:
        tokens = lang_dir / "tokens.txt" if lang_dir is not None and (
            lang_dir / "tokens.txt").is_file() else None
        model = _checked(load_model, model_path, tokens=tokens)
        if feature_changes:
            model.set_feature_config(model.feature_config.override(**feature_changes))
        click.echo(f"{model_path}: {model.describe()}")
        methods = supported_methods(model)
    click.echo(method_table(family_order(methods), verbose=_is_verbose()))


def _silence_option(fn):
    """``--silence-db`` of decode and tune (:attr:`k2dec.job.DecodeConfig.silence_db`)."""
    return click.option(
        "--silence-db", default=-60.0, show_default=True, type=_Number(-200.0, 0.0),
        help="An utterance with no feature frame louder than white noise at this level "
             "(dBFS) is silent and gets an empty hypothesis from every method; -200 turns "
             "the check off.")(fn)


def _silence(silence_db: float) -> float | None:
    return None if silence_db <= -200.0 else silence_db


@main.command("decode")
@click.option("--list-methods", "list_only", is_flag=True,
              help="List every method: its family, whether it takes --hotwords, what it "
                   "needs (graph files, --rnn-lm, references), what it does and its default "
                   "scales (with -v: its settings by part); then exit.")
@click.option("-v", "--verbose", is_flag=True, expose_value=False, callback=lambda ctx, _p, v:
              _verbose(ctx, v),
              help="Log at INFO level (as k2dec -v); with --list-methods also every method's "
                   "settings by part.")
@click.option("--describe", "describe", metavar="METHOD",
              help="Show METHOD's settings, one line per part with their defaults (the "
                   "keys --set takes), and what it needs; then exit.")
@_input_options
@_asset_options
@_method_options
@click.option("--out-dir", type=click.Path(path_type=Path),
              help="Where results go: <out-dir>/<method>/ (required unless --list-methods).")
@click.option("--retry-failed", is_flag=True,
              help="Decode again every cut recorded as failed (without it, only those whose "
                   "cut or --max-duration changed since they failed).")
@_silence_option
@click.option("--segmenter", type=click.Choice(["vad", "windows"]), default="vad",
              show_default=True,
              help="How a recording longer than --segment-max is cut for decoding: a voice "
                   "activity detector (silero-vad; speech it drops is reported) or fixed "
                   "windows with 2 s of context on each side (for audio without pauses). Its "
                   "words are stitched into one result per recording, times in its clock.")
@click.option("--segment-max", default=30.0, show_default=True,
              type=_Number(1.0, 600.0),
              help="Seconds: a longer recording is decoded in segments of at most this long "
                   "(any length is accepted; --max-duration then bounds a batch of segments).")
@click.option("--segment-window", default=None, type=_Number(1.0, 600.0),
              help="Seconds of each window's core (--segmenter windows), at most "
                   "--segment-max; default: the 99th percentile of the model's training "
                   "utterances when its file records them, else --segment-max.")
@click.option("--output-format", "output_formats", multiple=True,
              type=click.Choice(["srt", "vtt", "ctm", "jsonl", "textgrid", "lhotse"]),
              help="Also write these (repeatable), for the configured setting: srt / vtt / "
                   "textgrid one file per recording (<out-dir>/<method>/<format>-<test-set>/), "
                   "jsonl (words with start, end, confidence) and lhotse (supervisions with "
                   "word alignments) one file per test set; ctm files are always written.")
def decode_cmd(list_only, describe, cuts_path, audio_dir, text_path, test_set, model_path, lang_dir,
               graph_dir, rnn_lm, hotwords, lodr_arpa, methods, assignments, config_path,
               no_model_settings, max_duration, icefall_compat, threads, out_dir, retry_failed,
               silence_db, segmenter, segment_max, segment_window, output_formats,
               **features):
    """Decode cuts (--cuts) or a folder of audio files (--audio-dir) with one or more methods.

    Results stream to a JSONL file per method (a rerun resumes); icefall result files, WER and
    RTF follow. Every method, --set / --config value, needed graph or LM, token or word table
    and reference is checked before the first cut is decoded. Methods that weigh scores by
    scales report the configured scales (defaults: --list-methods; tuned ones: k2dec tune,
    then --config). Under torchrun every rank decodes a shard and rank 0 merges.

    Exit status: 0 when every cut of every method was decoded; 3 when some could not be
    (the others are written; one line per method says how many and why); 4 when no cut of
    any method could be decoded; 2 for a usage error found before decoding; 1 for another
    job on the out dir or a full disk.
    """
    import torch

    from .job import DecodeConfig, dist_info, results_table, run_decode
    from .results import lock_out_dir

    changes = _feature_changes(features)
    if list_only:
        _list_methods(model_path, lang_dir, changes)
        return
    if describe is not None:
        from .job import describe_method

        click.echo(_checked(describe_method, describe))
        return
    if out_dir is None:
        raise click.UsageError("--out-dir is required")
    config_path = _settings_path(config_path, model_path, no_model_settings)
    runs = _plan(methods, assignments, config_path, icefall_compat)
    torch.set_num_threads(threads)
    world_size, rank = dist_info()
    cfg = _checked(DecodeConfig, max_duration=max_duration, retry_failed=retry_failed,
                   world_size=world_size, rank=rank,
                   silence_db=_silence(silence_db), segmenter=segmenter,
                   segment_max=segment_max, segment_window=segment_window,
                   output_formats=tuple(output_formats))
    assets, refs = _load_job(runs, cuts_path, audio_dir, text_path, model_path, lang_dir,
                             graph_dir, rnn_lm, hotwords, lodr_arpa, changes)
    # one job per out dir, from before an audio folder's features are computed into it
    _job_errors(click.get_current_context().with_resource, lock_out_dir(out_dir, rank))
    if world_size > 1 and not torch.distributed.is_initialized():
        torch.distributed.init_process_group("gloo")
    name, cuts, unreadable = _load_cuts(cuts_path, audio_dir, refs, test_set,
                                        out_dir / "features", runs,
                                        assets.model.feature_config.extractor(), 0,
                                        f".rank{rank}" if world_size > 1 else "")
    rows = _job_errors(run_decode, assets, {name: cuts}, runs, out_dir, cfg,
                       failed={name: unreadable})
    if rank == 0:
        _echo_table("\n" + results_table(rows, all_settings=True))
        _exit_if_failed(rows)


def _echo_table(text: str) -> None:
    """Print the results table; a reader that closed stdout (``k2dec decode ... | head -1``)
    stops nothing: every result file is complete by now, so the exit status stays that of
    the job."""
    try:
        click.echo(text)
        sys.stdout.flush()
    except BrokenPipeError:  # what is left unprinted goes nowhere (Python's own recipe)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


#: The exit status of a decode (or demo) in which some cuts could not be decoded: everything
#: that could be decoded is written, and one line per method says how many failed and why.
FAILED_CUTS_STATUS = 3
#: The exit status of a decode (or demo) in which no cut of any method could be decoded (every
#: cut failed at run time: a wrong --max-duration, unreadable audio, ...): nothing to score.
ALL_FAILED_STATUS = 4


def _exit_if_failed(rows) -> None:
    """One line per test set and method with failed cuts (how many, the first one's reason),
    then exit with :data:`ALL_FAILED_STATUS` when no cut of any method was decoded, else
    :data:`FAILED_CUTS_STATUS`; nothing when every cut was decoded."""
    failed = [r for r in rows if r.failed]
    for r in failed:
        click.echo(f"{r.test_set} {r.method}: {len(r.failed)} of {r.num_cuts} cuts failed "
                   f"(first: {r.failed[0]}: {r.first_failure}); see {r.results_path}", err=True)
    if failed and all(len(r.failed) >= r.num_cuts for r in rows):
        click.echo("no cut could be decoded (exit status 4)", err=True)
        click.get_current_context().exit(ALL_FAILED_STATUS)
    if failed:
        click.get_current_context().exit(FAILED_CUTS_STATUS)


@main.command("tune")
@_input_options
@_asset_options
@_method_options
@click.option("--grid", multiple=True,
              help="FIELD=V1,V2,... (repeatable): also try these values of a config field "
                   "(e.g. graph.scale=0.4,0.6,0.8), every combination, in each method that has "
                   "the field.")
@click.option("--out", "out_path", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="The settings file to write (JSON), for k2dec decode --config.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the dev-set decodes (and an audio folder's features) here: a rerun "
                   "resumes them. Default: a temporary folder, removed when tune ends.")
@_silence_option
def tune_cmd(cuts_path, audio_dir, text_path, test_set, model_path, lang_dir, graph_dir,
             rnn_lm, hotwords, lodr_arpa, methods, assignments, config_path, no_model_settings,
             max_duration, icefall_compat, threads, grid, out_path, work_dir, silence_db,
             **features):
    """Pick each method's settings on a dev set and write them for k2dec decode --config.

    Each method decodes the dev set (--cuts, or --audio-dir with references) with its scale
    sweep on (every point of icefall's scale grids, for methods that weigh scores by scales),
    once per point of --grid; the setting with the lowest WER wins. The written file keeps
    the other methods of a --config file it started from, and holds a Platt calibration of
    the chosen settings' confidences (fit on the dev words; decode applies it to CTM files
    and confidence summaries).

    \b
        k2dec tune --cuts dev.jsonl.gz --model model.pt --lang-dir lang --graph-dir graphs \\
            --method nbest-rescoring --method 1best --grid graph.scale=0.4,0.6,0.8 \\
            --out tuned.json
        k2dec decode --config tuned.json --method nbest-rescoring ...
    """
    import tempfile

    import torch

    from .job.tune import parse_grid

    _checked(parse_grid, grid)  # a malformed or huge grid, before any feature is computed
    config_path = _settings_path(config_path, model_path, no_model_settings)
    runs = _plan(methods, assignments, config_path, icefall_compat)
    torch.set_num_threads(threads)
    assets, refs = _load_job(runs, cuts_path, audio_dir, text_path, model_path, lang_dir,
                             graph_dir, rnn_lm, hotwords, lodr_arpa, _feature_changes(features))
    if work_dir is not None:
        results, name = _tune(assets, refs, runs, cuts_path, audio_dir, test_set, grid,
                              max_duration, work_dir, _silence(silence_db))
    else:  # nothing of the dev-set decodes stays behind
        with tempfile.TemporaryDirectory(prefix="k2dec-tune-") as tmp:
            results, name = _tune(assets, refs, runs, cuts_path, audio_dir, test_set, grid,
                                  max_duration, Path(tmp), _silence(silence_db))
    _write_tuned(results, name, config_path, out_path)


def _tune(assets, refs, runs, cuts_path, audio_dir, test_set, grid, max_duration, work_dir,
          silence_db):
    """``(tune results, dev-set name)``: the dev set decoded under ``work_dir``."""
    from .job import DecodeConfig, tune_methods

    name, cuts, _ = _load_cuts(cuts_path, audio_dir, refs, test_set, work_dir / "features",
                               runs, assets.model.feature_config.extractor(), max_duration)
    return _job_errors(_checked, tune_methods, assets, {name: cuts}, runs, work_dir, grid,
                       _checked(DecodeConfig, max_duration=max_duration,
                                silence_db=silence_db)), name


def _write_tuned(results, name, config_path, out_path) -> None:
    """Write the settings file of ``results`` and print what tuning found."""
    from .job import read_settings, tuned_settings, write_settings

    base = read_settings(config_path) if config_path is not None else None
    path = write_settings(tuned_settings(results, [name], base), out_path)
    click.echo("| method | WER % before | WER % tuned | settings compared | chosen | "
               "confidences calibrated (dev NCE raw -> calibrated) |")
    click.echo("| --- | ---: | ---: | ---: | --- | --- |")
    for r in results:
        cal = ", ".join(f"{k} ({raw:.3f} -> {fit:.3f})" for k, (raw, fit) in r.dev_nce.items())
        click.echo(f"| {r.method} | {r.start_wer:.2f} | {r.dev_wer:.2f} | {r.num_settings} | "
                   f"{' '.join(r.chosen) or '(as configured)'} | {cal or '-'} |")
    click.echo(f"wrote {path}; decode with: k2dec decode --config {path} ...")


def _checked(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``; a ``ValueError`` (bad input) becomes a usage error."""
    try:
        return fn(*args, **kwargs)
    except ValueError as e:
        raise click.UsageError(str(e)) from None


def _job_errors(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``; another job on the out dir, an out dir that cannot be
    written or a full disk becomes a plain error message (exit status 1)."""
    from .results import DiskFullError, LockedError, UnusableDirError

    try:
        return fn(*args, **kwargs)
    except (LockedError, DiskFullError, UnusableDirError) as e:
        raise click.ClickException(str(e)) from None


_PASSTHROUGH = {"ignore_unknown_options": True, "allow_extra_args": True,
                "help_option_names": []}


@main.command("train-lm", context_settings=_PASSTHROUGH, add_help_option=False)
@click.pass_context
def train_lm_cmd(ctx):
    """Train an RNN or Transformer LM on a text file (BPE tokens); see --help."""
    from .train.lm_trainer import main as train_main

    train_main(ctx.args)


@main.command("export-lm")
@click.argument("checkpoints", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="File to write (float16 weights, no optimizer state).")
def export_lm_cmd(checkpoints, output):
    """Average train-lm CHECKPOINTS into one small LM file for decoding (--rnn-lm)."""
    from .lm.checkpoint import export_lm

    path = _checked(export_lm, checkpoints, output)
    click.echo(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB) from {len(checkpoints)} "
               "checkpoint(s)")


@main.command("train-token-lm")
@click.option("--text", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="LM training text, one sentence a line (plain or gzipped), in the case the "
                   "BPE model was trained on.")
@click.option("--lang-dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A BPE lang dir: its bpe.model spells the text.")
@click.option("--bpe-model", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Or the sentencepiece model itself.")
@click.option("--order", default=2, show_default=True, type=click.IntRange(1, 5),
              help="n-gram order (icefall's LODR uses a bigram).")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The ARPA file to write (words = token ids; .gz: gzipped), e.g. "
                   "data/lang_bpe_500/2gram.arpa; an existing file is replaced.")
def train_token_lm_cmd(text, lang_dir, bpe_model, order, output):
    """Train the token n-gram that the LODR methods subtract (decode --lodr-arpa): every line
    of TEXT as BPE token ids, a Kneser-Ney n-gram over them (kaldingram)."""
    from .lang import bpe_model_path
    from .scorers import read_arpa, train_token_arpa

    try:
        bpe_model = bpe_model_path(lang_dir, bpe_model)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    _not_an_input(output, [text, bpe_model])
    path = _checked(train_token_arpa, text, bpe_model, output, order=order, overwrite=True)
    model = read_arpa(path)
    counts = [sum(1 for k in model.prob if len(k) == n) for n in range(1, model.order + 1)]
    click.echo(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB; "
               + ", ".join(f"{n + 1}-grams {c}" for n, c in enumerate(counts))
               + f"); decode with --lodr-arpa {path}")


@main.command("lm-perplexity", context_settings=_PASSTHROUGH, add_help_option=False)
@click.pass_context
def lm_perplexity_cmd(ctx):
    """Perplexity of a trained neural LM on a text file; see --help."""
    from .lm.perplexity import main as ppl_main

    result = ppl_main(ctx.args)
    click.echo(f"perplexity {result.perplexity:.3f} over {result.num_tokens} tokens")


@main.command("demo")
@click.option("--work-dir", type=click.Path(path_type=Path), default=Path("exp/demo"),
              show_default=True, help="Where the demo writes graphs, features and results.")
@click.option("--method", "methods", multiple=True,
              help="Run only these methods (repeatable; default: every method whose "
                   "resources ship).")
@click.option("--set", "assignments", multiple=True,
              help="KEY=VALUE config overrides, as for k2dec decode.")
@click.option("--tune", "tune_out", type=click.Path(dir_okay=False, path_type=Path),
              default=None,
              help="Instead of the demo: make the shipped settings file again (k2dec tune on "
                   "the shipped utterances the demo does not report) and write it here.")
@click.option("--num-utts", default=20, show_default=True, type=int,
              help="Without the shipped model only: number of synthetic utterances.")
@click.option("--seed", default=0, show_default=True, type=int,
              help="Without the shipped model only: seed of the synthetic posteriors.")
def demo_cmd(work_dir, methods, assignments, tune_out, num_utts, seed):
    """The main job (`make demo`): decode the shipped test sets (the first 30 utterances of
    each) with the shipped model and every method.

    It compiles HLG, LG and G_4_gram from the shipped (gzipped) LMs into WORK_DIR/graphs,
    leaving the shipped lang dir as it is, decodes with each method's default settings and
    the shipped model's tuned scales (assets/librispeech-synth/decode.json, made by k2dec
    tune), and writes icefall result files, RESULTS.md and a WER-vs-RTF plot under
    WORK_DIR. A rerun resumes. Without the shipped assets (a wheel install) it decodes
    synthetic posteriors through example graphs instead, and says so. Exit status 3 when
    some cuts could not be decoded, 4 when none could (as k2dec decode).
    """
    from .demo import run_demo, tune_shipped

    if tune_out is not None:
        path = tune_shipped(work_dir, tune_out, methods=methods or None)
        click.echo(f"wrote {path}")
        return
    rows = _checked(run_demo, work_dir, num_utts=num_utts, seed=seed, methods=methods or None,
                    overrides=assignments)
    _exit_if_failed(rows)


@main.command("align")
@click.option("--audio", "audio_files", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An audio file to align (repeatable); its id is its stem.")
@click.option("--audio-dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Align every audio file under this folder (ids: file stems).")
@click.option("--text", "text_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The transcripts: a Kaldi text file, one line per recording: ID TRANSCRIPT "
                   "(ID = the audio file's stem, as k2dec decode names utterances).")
@click.option("--model", "model_path", required=True,
              type=click.Path(exists=True, path_type=Path),
              help="The acoustic model (it needs a CTC head).")
@click.option("--lang-dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="The lang dir (bpe.model; words.txt flags OOV words).")
@click.option("--out-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Where <id>.<format> files and align-summary.jsonl go.")
@click.option("--output-format", "formats", multiple=True, default=("jsonl", "ctm"),
              show_default=True, type=click.Choice(["srt", "vtt", "ctm", "jsonl", "textgrid",
                                                    "lhotse"]),
              help="Files to write per recording (repeatable).")
@click.option("--min-word-score", default=None, type=_Number(-1e6, 0.0),
              help="Words whose score (the log-prob of the word's path minus that of the "
                   "free CTC labels of its frames, <= 0) is lower are reported as missing "
                   "(default: AlignConfig's, chosen on dev material).")
@click.option("--min-confidence", default=None, type=_Number(0.0, 1.0),
              help="Words with a lower confidence are reported as missing too (default: "
                   "AlignConfig's).")
@click.option("--untranscribed-penalty", default=None, type=_Number(0.0, 1000.0),
              help="Log-prob by which speech the transcript lacks must beat the transcript "
                   "to be reported (default: AlignConfig's).")
@click.option("--no-untranscribed", is_flag=True,
              help="Plain forced alignment: do not look for speech the transcript lacks "
                   "(and skip no word).")
@click.option("--skip-penalty", default=None, type=_Number(0.0, 1000.0),
              help="Log-prob a transcript word the audio lacks costs when skipped (reported "
                   "as not in the audio, no times) instead of aligned (default: "
                   "AlignConfig's, chosen on dev material).")
@click.option("--no-skip-words", is_flag=True,
              help="Align every transcript word (a word the audio lacks is squeezed into "
                   "frames and flagged by its score).")
@click.option("--segment-max", "max_segment", default=None, type=_Number(1.0, 600.0),
              help="Seconds: longer recordings are aligned VAD segment by segment (as "
                   "k2dec decode's --segment-max; default: AlignConfig's, 30).")
@click.option("--device", default="cpu", show_default=True, help="torch device.")
def align_cmd(audio_files, audio_dir, text_path, model_path, lang_dir, out_dir, formats,
              min_word_score, min_confidence, untranscribed_penalty, no_untranscribed,
              skip_penalty, no_skip_words, max_segment, device):
    """Align transcripts to audio (forced alignment through the model's CTC output): the
    start, end and confidence of every word and BPE piece, in --output-format files.

    Recordings longer than --segment-max are cut by a VAD and anchored by a greedy CTC pass.
    Exit status 0 when every word was aligned unflagged (score >= --min-word-score,
    confidence >= --min-confidence) and no speech outside the transcript was found; 3 when
    some words are missing (the audio likely lacks them or says another word; a word the
    alignment skipped has no times, see --skip-penalty), some speech
    is not in the transcript ("speech not in the transcript at 12.3-14.1 s"; both listed on
    stderr and in align-summary.jsonl) or some recordings failed; 4 when no recording could
    be aligned.
    """
    from .recognizer.align import AlignConfig, write_align_summary

    if not audio_files and audio_dir is None:
        raise click.UsageError("give --audio FILE (repeatable) or --audio-dir DIR")
    if no_untranscribed and untranscribed_penalty is not None:
        raise click.UsageError("--no-untranscribed and --untranscribed-penalty contradict")
    if (no_skip_words or no_untranscribed) and skip_penalty is not None:
        raise click.UsageError("--skip-penalty contradicts --no-skip-words / --no-untranscribed")
    given = {"min_word_score": min_word_score, "min_confidence": min_confidence,
             "untranscribed_penalty": untranscribed_penalty, "skip_penalty": skip_penalty,
             "max_segment": max_segment}
    given = {k: v for k, v in given.items() if v is not None}
    if no_untranscribed:
        given["untranscribed_penalty"] = None
    if no_skip_words or no_untranscribed:
        given["skip_penalty"] = None
    config = _checked(AlignConfig, **given)
    results = _checked(_align, audio_files, audio_dir, text_path, model_path, lang_dir,
                       out_dir, formats, config, device)
    write_align_summary(out_dir / "align-summary.jsonl", results)
    bad = [r for r in results if not r.ok]
    for r in bad:
        click.echo(f"{r.id}: {r.problems()}", err=True)
    click.echo(f"aligned {sum(not r.error for r in results)} of {len(results)} recordings; "
               f"files in {out_dir}")
    if results and all(r.error for r in results):
        click.get_current_context().exit(ALL_FAILED_STATUS)
    if bad:
        click.get_current_context().exit(FAILED_CUTS_STATUS)


def _align(audio_files, audio_dir, text_path, model_path, lang_dir, out_dir, formats, config,
           device):
    """Load the model and transcripts and align (k2dec.recognizer.align.align_files)."""
    from .data import scan_audio_dir, utterance_id
    from .job import load_assets
    from .recognizer.align import align_files, read_transcripts

    files = {utterance_id(p): p for p in audio_files}
    if audio_dir is not None:
        folder = scan_audio_dir(audio_dir)
        files.update(folder.files)
        files.update({f.cut_id: f.path for f in folder.unusable})  # failures, reported
    transcripts = read_transcripts(text_path)
    assets = load_assets(model_path, lang_dir, device=device)
    if assets.sp is None:
        raise ValueError("alignment spells words in BPE pieces: give --lang-dir with a "
                         "bpe.model (or put bpe.model beside the model)")
    vocabulary = assets.lang.word_table if assets.lang is not None else None
    return align_files(assets.model, assets.sp, files, transcripts, out_dir, formats, config,
                       vocabulary)


if __name__ == "__main__":  # pragma: no cover
    main()
