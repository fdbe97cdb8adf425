"""The decode driver: methods x ``KEY=VALUE`` assignments x resources -> one
:class:`~k2dec.job.DecodeSummary` row per test set and method, and a results table.

``k2dec decode``, ``k2dec demo`` and ``recipes/librispeech/decode.py`` all run through it::

    runs = plan_methods(["1best", "modified_beam_search"], ["search.beam_size=8", "num_paths=50"])
    assets = load_assets("model.pt", "data/lang_bpe_256")
    rows = run_decode(assets, {"test-clean": cuts}, runs, "exp/decode")
    print(results_table(rows))

Everything that can be checked before decoding is checked here, before the first cut: the
method names, each assignment (it must reach a field of some given method's config, with a
value of the field's type that the config accepts) and the resources each method requires.
Assignments may also come from a settings file (:mod:`k2dec.job.settings`, written by
:func:`k2dec.job.tune_methods`). :func:`method_table` lists the methods and their needs
(``k2dec decode --list-methods``).
"""

from __future__ import annotations

import logging
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lhotse import CutSet

from ..data import split_bad_cuts
from ..lang import match_case
from ..methods import (
    OLD_KEYS,
    Method,
    Resources,
    config_field_path,
    config_keys,
    describe_settings,
    get_method,
    override_config,
)
from ..results import Calibration
from .assets import (
    GRAPH_FILES,
    DecodeAssets,
    need_hint,
    out_of_vocabulary,
    reference_case,
    text_need,
)
from .checks import check_cuts, warn_unknown_characters
from .config import DecodeConfig, DecodeSummary
from .cutset import decode_cuts
from .encoder import JobEncoder
from .resume import JobInputs
from .settings import DecodeSettings

__all__ = [
    "OOV_WARNING_SHARE",
    "MethodRun",
    "check_assets",
    "check_resources",
    "describe_method",
    "method_table",
    "plan_methods",
    "results_table",
    "run_decode",
    "split_available",
    "warn_out_of_vocabulary",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MethodRun:
    """A method and the config it runs with (its defaults with ``assignments`` applied, in
    order), and the calibration of its settings' confidences in CTM files (``{setting key:
    Calibration}``, from a settings file; see :mod:`k2dec.job.settings`)."""

    method: Method
    config: Any
    assignments: tuple[str, ...] = ()
    calibration: Mapping[str, Calibration] = field(default_factory=dict)


def _applies(config: Any, assignment: str) -> bool:
    """True if the assignment's key reaches a field of ``config`` (an ambiguous bare name
    counts: :func:`override_config` then says which fields it could mean)."""
    try:
        return config_field_path(config, assignment.split("=", 1)[0]) is not None
    except ValueError:
        return True


def _target(assignment: str) -> tuple[str | None, str]:
    """``(method, KEY=VALUE)`` of a ``METHOD:KEY=VALUE`` assignment, ``(None, assignment)``
    of a plain one."""
    key = assignment.split("=", 1)[0]
    if ":" not in key:
        return None, assignment
    method, rest = assignment.split(":", 1)
    return method, rest


def _resolve(methods: Sequence[str | Method]) -> tuple[list[Method], list[str]]:
    """The methods (each once) and the problems with the others."""
    problems: list[str] = []
    resolved: list[Method] = []
    for m in methods:
        try:
            method = get_method(m) if isinstance(m, str) else m
        except ValueError as e:
            problems.append(str(e))
            continue
        if any(r.name == method.name for r in resolved):
            problems.append(f"method {method.name!r} is given twice")
            continue
        resolved.append(method)
    return resolved, problems


def _valid_keys(methods: Sequence[Method]) -> str:
    keys = {k for m in methods for k in config_keys(m.default_config())}
    return ", ".join(sorted(keys)) or "none"


def _own(method: Method, config: Any, assignments: Sequence[str]) -> dict[str, str]:
    """``{given assignment: KEY=VALUE}`` of the assignments that reach ``method``: the plain
    ones its config has a field for, and the ones qualified with its name."""
    out = {}
    for a in assignments:
        target, item = _target(a)
        if target in (None, method.name) and _applies(config, item):
            out[a] = item
    return out


def _unused(assignments: Sequence[str], used: set[str], methods: Sequence[Method],
            where: str = "") -> list[str]:
    """A problem naming the assignments no method took, with the keys the methods have."""
    names = {m.name for m in methods}
    wrong = [a for a in assignments if _target(a)[0] not in (None, *names)]
    unused = [a for a in assignments if a not in used and a not in wrong]
    out = [f"{a!r} names no given method (METHOD:KEY=VALUE){where}" for a in wrong]
    if unused:
        out.append(f"no given method has a field for {', '.join(unused)}{where} (the given "
                   f"methods' keys: {_valid_keys(methods)})")
    old = {k: OLD_KEYS[k] for k in (_target(a)[1].split("=", 1)[0] for a in unused)
           if k in OLD_KEYS}
    out += [f"{k!r} was renamed in k2dec 0.2 (now {' or '.join(new)})" for k, new in old.items()]
    return out


def plan_methods(methods: Sequence[str | Method], assignments: Sequence[str] = (),
                 require_used: bool = True, settings: DecodeSettings | None = None
                 ) -> list[MethodRun]:
    """Each method with its config: every ``KEY=VALUE`` assignment is applied to each method
    whose config has the field ``KEY`` (see :func:`k2dec.methods.override_config`);
    ``METHOD:KEY=VALUE`` to that method only.

    Args:
      methods: names (icefall's) or :class:`~k2dec.methods.Method` objects, each once.
      assignments: ``KEY=VALUE`` strings (``search.beam_size=8``, ``lattice.search_beam=15``,
        ``lm_scales=0.5,1.0``, ``fast_beam_search:beam=10``). A key means one thing in
        every method that has it (each part is one class, :data:`k2dec.methods.PARTS`); a
        key of version 0.1 (``beam`` of modified_beam_search, ``hlg_scale``) is refused
        with its new name.
      require_used: an assignment that no method's config has is an error (else ignored).
      settings: a settings file's content, applied before ``assignments``: its ``set``
        where the field exists (checked like ``assignments``: one that no given method has
        is an error with ``require_used``), then its entries for each given method (each
        must fit the method; entries for methods not given are ignored).

    Raises:
      ValueError: naming every problem found: unknown or repeated methods, malformed
        assignments, renamed keys, values of the wrong type or rejected by the config,
        unused assignments (with the keys the given methods have).
    """
    resolved, problems = _resolve(methods)
    problems += [f"expected KEY=VALUE, got {a!r}" for a in assignments if "=" not in a]
    assignments = [a for a in assignments if "=" in a]
    settings = settings or DecodeSettings()
    in_file = f" (in the \"set\" of {settings.source or 'the settings'})"
    runs, used, used_in_file, rejected = [], set(), set(), {}
    for method in resolved:
        default = method.default_config()
        mine, from_file = (_own(method, default, assignments),
                           _own(method, default, settings.assignments))
        used.update(mine)
        used_in_file.update(from_file)
        mine = [*from_file.values(), *settings.methods.get(method.name, ()), *mine.values()]
        try:
            runs.append(MethodRun(method, override_config(default, mine), tuple(mine),
                                  dict(settings.calibration.get(method.name, {}))))
        except ValueError as e:
            rejected.setdefault(str(e), []).append(method.name)
    problems += [f"{e} (in {', '.join(names)})" for e, names in rejected.items()]
    if require_used:
        problems += _unused(assignments, used, resolved)
        problems += _unused(settings.assignments, used_in_file, resolved, in_file)
    if problems:
        raise ValueError("; ".join(problems))
    return runs


def split_available(methods: Sequence[Method], resources: Resources
                    ) -> tuple[list[Method], dict[str, tuple[str, ...]]]:
    """``(methods whose requirements the resources meet, {name: what the others lack})``."""
    ok, lacking = [], {}
    for m in methods:
        missing = resources.missing(m.requires)
        if missing:
            lacking[m.name] = missing
        else:
            ok.append(m)
    return ok, lacking


def check_resources(runs: Sequence[MethodRun], resources: Resources) -> None:
    """Raise ``ValueError`` naming each method whose requirements ``resources`` lack, and how
    to supply them."""
    _, lacking = split_available([r.method for r in runs], resources)
    if lacking:
        raise ValueError("; ".join(f"method {name!r} needs {', '.join(map(need_hint, needs))}"
                                   for name, needs in lacking.items()))


def check_assets(runs: Sequence[MethodRun], assets: DecodeAssets) -> None:
    """Everything about the assets that a job checks before its first cut: each method's
    requirements (:func:`check_resources`) and what turns its hypotheses into words
    (:func:`k2dec.job.assets.text_need`: words.txt for word ids; a bpe.model or tokens.txt
    for token ids).

    Raises:
      ValueError: naming every method concerned and what to give.
    """
    problems = []
    try:
        check_resources(runs, assets.resources)
    except ValueError as e:
        problems.append(str(e))
    for r in runs:
        need = text_need(assets, r.method)
        if need is not None:
            problems.append(f"method {r.method.name!r} needs {need}")
    if problems:
        raise ValueError("; ".join(problems))


def run_decode(
    assets: DecodeAssets,
    test_sets: Mapping[str, CutSet],
    runs: Sequence[MethodRun],
    out_dir: str | Path,
    config: DecodeConfig = DecodeConfig(),  # noqa: B008 (frozen)
    failed: Mapping[str, Mapping[str, str]] | None = None,
    encoder: JobEncoder | None = None,
    inputs: JobInputs | None = None,
) -> list[DecodeSummary]:
    """Decode every test set with every planned method (:func:`decode_cuts`: resumable JSONL
    and icefall files under ``out_dir/<method>/``), after checking the resources and every
    test set's utterances (:func:`check_cuts`: unique ids; references for oracle methods).

    Args:
      test_sets: cuts by test-set name.
      failed: by test-set name, ``{cut_id: reason}`` of utterances that never became cuts
        (unreadable audio files); recorded as failed cuts.
      encoder: the network pass (:class:`k2dec.job.encoder.JobEncoder`) to share with other
        calls; default: one whose caches (``config.encoder_cache_mb``,
        ``config.lattice_cache_mb``) serve this call's methods, so that each utterance goes
        through the network once and each lattice setting is searched once; they are
        emptied after each test set.
      inputs: the digests of the assets that key resuming
        (:class:`k2dec.job.resume.JobInputs`); default: computed once for this call.

    Returns:
      one :class:`DecodeSummary` per test set and method, test sets outermost, in the given
      orders.

    Raises:
      ValueError: from :func:`check_assets` or :func:`check_cuts`, before any cut is
        decoded.
    """
    check_assets(runs, assets)
    split = {name: split_bad_cuts(cuts) for name, cuts in test_sets.items()}  # fail alone
    test_sets = {name: good for name, (good, _) in split.items()}
    failed = {name: {**(failed or {}).get(name, {}), **bad} for name, (_, bad) in split.items()}
    for name, cuts in test_sets.items():  # repeated utterance ids, missing references
        utterances = check_cuts([r.method for r in runs], cuts)
        warn_out_of_vocabulary(assets, utterances, name)
        warn_unknown_characters(assets, utterances, name)
    own = encoder is None
    if own:  # one network pass and lattice search per utterance for all the methods (bounded)
        shared = len(runs) > 1
        encoder = JobEncoder(config.batch_encoder, config.encoder_cache_mb if shared else 0,
                             config.lattice_cache_mb if shared else 0)
    inputs = inputs or JobInputs(assets)  # each asset hashed once per job
    rows = []
    for name, cuts in test_sets.items():
        rows += [decode_cuts(assets, cuts, r.method, out_dir, name, r.config, config,
                             failed=failed.get(name), encoder=encoder,
                             calibration=r.calibration, inputs=inputs) for r in runs]
        if own:  # the next test set has other utterances: free the budget for them
            encoder.clear()
    return rows


#: Above this share of reference words outside the vocabulary, a job warns.
OOV_WARNING_SHARE = 0.5


def warn_out_of_vocabulary(assets: DecodeAssets, utterances: CutSet, name: str) -> float:
    """Warn (logged) when most reference words of ``utterances`` are outside the vocabulary
    (:func:`k2dec.job.assets.out_of_vocabulary`, after matching the references' case to it:
    scoring ignores case): the WER would count them all as errors, e.g. references in
    another language or spelling than the model's. Returns the share (0 without references
    or a vocabulary to check)."""
    case = reference_case(assets)
    words = [match_case(w, case) for c in utterances for s in c.supervisions[:1]
             if isinstance(s.text, str) for w in s.text.split()]
    found = out_of_vocabulary(assets, words) if words else None
    if found is None:
        return 0.0
    oov, vocabulary = found
    share = len(oov) / len(words)
    if share > OOV_WARNING_SHARE:
        logger.warning("%s: %d of %d reference words (%.0f%%) are not in %s (e.g. %s): the "
                       "WER counts each as an error; are the references in the model's "
                       "language and spelling?", name, len(oov), len(words), 100 * share,
                       vocabulary, ", ".join(dict.fromkeys(oov[:20]).keys()))
    return share


def results_table(rows: Sequence[DecodeSummary], all_settings: bool = False) -> str:
    """A Markdown table: per test set and method the WER of its configured setting (with
    ``all_settings``: of every setting it reported, in the method's order; a sweep's),
    the RTF, the cuts that could not be decoded (not in the WER; ``N of M``) and the
    degenerate hypotheses of its configured setting (:attr:`DecodeSummary.degenerate`: a
    looping search shows here even without references). Rows keep the given order: nothing
    is sorted or picked by WER."""
    lines = ["| test set | method | setting | WER % | RTF | failed cuts (not in WER) | "
             "degenerate hyps |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for s in rows:
        settings = list(s.wers.items()) if all_settings else [s.headline]
        for key, wer in settings or [s.headline]:
            lines.append(f"| {s.test_set} | {s.method} | {key} | {wer:.2f} | {s.rtf:.4f} | "
                         f"{len(s.failed)} of {s.num_cuts} | {s.degenerate} |")
    return "\n".join(lines)


def _needs(method: Method) -> str:
    """What a method needs besides the model, in the words of the command line."""
    short = {"H": "--lang-dir", "lm": "--rnn-lm", "lodr": "--lodr-arpa", "hotwords": "--hotwords",
             "attention_decoder": "attention decoder"}
    needs = [GRAPH_FILES.get(r, short.get(r, r)) for r in method.requires]
    if method.needs_references:
        needs.append("references")
    return ", ".join(dict.fromkeys(needs)) or "-"


#: The width ``--list-methods`` and ``--describe`` fit their lines in.
TABLE_WIDTH = 100


class _Wrapper(textwrap.TextWrapper):
    """A text wrapper that may also break after a comma (a long list of values)."""

    def _split(self, text: str) -> list[str]:
        return [piece for chunk in super()._split(text)
                for piece in re.split(r"(?<=,)(?=.)", chunk)]


def _wrapped(text: str, indent: int, first: int | None = None) -> list[str]:
    """``text`` in lines of at most :data:`TABLE_WIDTH` columns, the first indented by
    ``first`` spaces (default ``indent``), the others by ``indent``; nothing is cut."""
    wrapper = _Wrapper(TABLE_WIDTH, initial_indent=" " * (indent if first is None else first),
                       subsequent_indent=" " * indent, break_on_hyphens=False)
    return wrapper.wrap(text)


def _settings_lines(m: Method, indent: int) -> list[str]:
    """A method's settings, one part per (wrapped) line, indented (the keys ``--set`` takes)."""
    lines = []
    for part in describe_settings(m.default_config()):
        lines += _wrapped(part, indent + 4, first=indent)
    return lines


def describe_method(name: str) -> str:
    """``k2dec decode --describe``: a method's name, family, needs and description, then its
    settings one line per part with their defaults (:func:`k2dec.methods.describe_settings`),
    every line at most :data:`TABLE_WIDTH` columns (a part's long line continues indented).

    Raises:
      ValueError: an unknown method name (listing the known ones).
    """
    m = get_method(name)
    lines = _wrapped(f"{m.name} ({m.family.value}; needs: {_needs(m)}; hotwords: "
                     f"{'yes' if m.hotwords else 'no'})", 4, first=0)
    lines += _wrapped(m.description, 0) + ["settings (--set PART.FIELD=VALUE):"]
    return "\n".join(lines + _settings_lines(m, 2))


def method_table(methods: Sequence[Method], verbose: bool = False) -> str:
    """The ``--list-methods`` table, every line at most :data:`TABLE_WIDTH` columns: per
    method a row (name, family, whether it takes ``--hotwords`` (:attr:`Method.hotwords`),
    what it needs besides the model: graph files in ``--graph-dir`` or the lang dir,
    ``--rnn-lm``, an attention decoder in the model, references for oracle methods), then,
    indented, what it does and its configured scales when it weighs scores by scales
    (``k2dec tune`` tunes them); with ``verbose`` also its settings with their defaults, by
    part (:func:`k2dec.methods.describe_settings`: the keys ``--set`` takes; else
    :func:`describe_method` shows them). A row's first word is the method's name; every
    other line but the header's is indented."""
    head = ("method", "family", "hotwords", "needs")
    rows = [(m.name, m.family.value, "yes" if m.hotwords else "-", _needs(m)) for m in methods]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
    lines = _row(head, widths) + _wrapped(
        "what it does (settings by part: k2dec decode --describe METHOD, or --list-methods -v)",
        4)
    for m, row in zip(methods, rows):
        scales = " ".join(f"{k}={v}" for k, v in m.scale_fields().items())
        lines += _row(row, widths) + _wrapped(
            f"{m.description} Scales: {scales}." if scales else m.description, 4)
        if verbose:
            lines += _settings_lines(m, 4)
    return "\n".join(lines)


def _row(cells: Sequence[str], widths: Sequence[int]) -> list[str]:
    """A table row: the first cells padded to ``widths``, the last (the needs) wrapped under
    its own column (or on its own indented lines when that column has too little room)."""
    left = "  ".join(c.ljust(w) for c, w in zip(cells, widths)) + "  "
    room = TABLE_WIDTH - len(left)
    if room < 20:
        return [left.rstrip()] + _wrapped(cells[-1], 8)
    needs = _Wrapper(room, break_on_hyphens=False).wrap(cells[-1]) or [""]
    return [(left if i == 0 else " " * len(left)) + line for i, line in enumerate(needs)]
