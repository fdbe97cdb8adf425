"""Pick each method's settings on a dev set (``k2dec tune``).

For every method, the dev sets are decoded once per point of an optional grid of config
fields (``graph.scale=0.4,0.6,0.8``), each time with the method's scale sweep switched on when
it has one (``rescore.sweep=true``: every point of its scale grids, see
:meth:`k2dec.methods.Method.settings`). The setting with the lowest mean WER over the dev sets
wins (ties: the earliest, starting from the configured setting), and its assignments are
written to a settings file (:mod:`k2dec.job.settings`) that ``k2dec decode --config`` reads,
with a Platt calibration of the confidences of every setting a decode with the chosen config
reports (fit on the dev words of the chosen setting; the decode job applies it in CTM files
and confidence summaries, like the calibration of lattice confidences in Kaldi recipes)::

    runs = plan_methods(["nbest-rescoring", "1best"])
    results = tune_methods(assets, {"dev": dev_cuts}, runs, "exp/tune",
                           grid=["graph.scale=0.4,0.6"])
    write_settings(tuned_settings(results), "exp/tuned.json")

Each grid point decodes into its own directory (named by a digest of the method's config, so
a rerun resumes and a changed config starts afresh).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lhotse import CutSet

from ..methods import config_field_path, override_config
from ..results import Calibration, fit_calibration, normalized_cross_entropy, read_results
from ..results.paths import job_folder, replace_text
from .checks import check_cuts
from .config import DecodeConfig
from .driver import MethodRun, check_assets, run_decode
from .encoder import JobEncoder
from .outputs import ctm_settings, ctm_words
from .resume import JobInputs
from .settings import DecodeSettings

__all__ = ["TuneResult", "parse_grid", "tune_methods", "tuned_settings"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TuneResult:
    """What tuning found for one method.

    Attributes:
      method: the method's name.
      assignments: ``KEY=VALUE`` strings giving the chosen config from the method's defaults
        (the run's own assignments, then the chosen ones; one per field).
      chosen: the assignments tuning added to the run's config (``()``: it was best).
      dev_wer: mean WER % over the dev sets at the chosen setting.
      start_wer: mean WER % of the run's own (configured) setting.
      num_settings: settings compared.
      calibration: ``{setting key: Calibration}``: Platt scaling of the confidences of each
        setting a decode with the chosen config reports, fit on the dev sets' words (settings
        without confidences, or whose dev words are all correct or all wrong, get none).
      dev_nce: ``{setting key: (raw NCE, calibrated NCE)}`` on the dev words the
        calibration was fit on (the calibrated value is in-sample: optimistic).
    """

    method: str
    assignments: tuple[str, ...]
    chosen: tuple[str, ...]
    dev_wer: float
    start_wer: float
    num_settings: int
    calibration: Mapping[str, Calibration] = field(default_factory=dict)
    dev_nce: Mapping[str, tuple[float, float]] = field(default_factory=dict)


#: The most combinations a tuning grid may have: each is a decode of the dev set, and the
#: combinations are listed before the first one runs (memory and time bounded up front).
MAX_GRID_POINTS = 1000


def parse_grid(grid: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``["graph.scale=0.4,0.6"]`` -> ``[("graph.scale", ["0.4", "0.6"])]``.

    Raises:
      ValueError: an item without ``=`` or values, a field given twice, or more than
        :data:`MAX_GRID_POINTS` combinations.
    """
    out: list[tuple[str, list[str]]] = []
    for item in grid:
        key, _, values = item.partition("=")
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not key or not vals:
            raise ValueError(f"expected FIELD=V1,V2,... for a grid, got {item!r}")
        if any(k == key for k, _ in out):
            raise ValueError(f"grid field {key!r} is given twice")
        out.append((key, vals))
    points = math.prod(len(v) for _, v in out)
    if points > MAX_GRID_POINTS:
        sizes = " x ".join(str(len(v)) for _, v in out)
        raise ValueError(f"the grid has {points} combinations ({sizes}), more than "
                         f"{MAX_GRID_POINTS}: each is a decode of the dev set; give fewer values")
    return out


def _points(run: MethodRun, grid: list[tuple[str, list[str]]]) -> list[tuple[str, ...]]:
    """The grid points that apply to ``run`` (fields its config has), the run's own config
    first (``()``); points giving an already listed config are dropped."""
    mine = [(k, v) for k, v in grid if config_field_path(run.config, k) is not None]
    points, seen = [()], [run.config]
    for combo in itertools.product(*(v for _, v in mine)):
        point = tuple(f"{k}={x}" for (k, _), x in zip(mine, combo))
        cfg = override_config(run.config, point)
        if cfg not in seen:
            points.append(point)
            seen.append(cfg)
    return points


def _compact(config: object, assignments: Sequence[str]) -> tuple[str, ...]:
    """``assignments`` with only the last one per field (bare and dotted names alike)."""
    last: dict[str, str] = {}
    for a in assignments:
        key = a.split("=", 1)[0]
        path = config_field_path(config, key)
        last.pop(".".join(path) if path else key, None)
        last[".".join(path) if path else key] = a
    return tuple(last.values())


def check_dev_references(name: str, cuts: CutSet) -> None:
    """Refuse a dev set that cannot give a WER: a cut with no reference (no supervision, or
    one whose text is ``None``), or no reference word in the whole set. An empty text is a
    reference (a silent recording's), as in a decode job: its insertions count.

    Raises:
      ValueError: naming the dev set and the first cuts without a reference.
    """
    missing = [c.id for c in cuts
               if not c.supervisions or all(s.text is None for s in c.supervisions)]
    if missing:
        raise ValueError(f"tuning needs references, but {len(missing)} cuts of {name!r} "
                         f"have none (e.g. {', '.join(missing[:5])})")
    if not any((s.text or "").split() for c in cuts for s in c.supervisions):
        raise ValueError(f"tuning needs reference words, but every reference of {name!r} is "
                         "empty (the WER of the set is undefined)")


def tune_methods(
    assets,
    dev_sets: Mapping[str, CutSet],
    runs: Sequence[MethodRun],
    out_dir: str | Path,
    grid: Sequence[str] = (),
    config: DecodeConfig = DecodeConfig(),  # noqa: B008 (frozen)
) -> list[TuneResult]:
    """Tune each run's method on ``dev_sets`` (see the module docstring).

    Args:
      assets: the :class:`~k2dec.job.DecodeAssets` to decode with.
      dev_sets: cuts with references, by name; the criterion is the mean of their WERs.
      runs: from :func:`~k2dec.job.plan_methods`: the starting configs.
      out_dir: decoding results go to ``out_dir/<method>/<config digest>/``.
      grid: ``FIELD=V1,V2,...`` items; each method is decoded at every combination of the
        fields its config has.

    Returns:
      one :class:`TuneResult` per run, in order.

    Raises:
      ValueError: before decoding anything: a malformed grid, a grid field no method has, a
        method with nothing to tune (no scale sweep and no grid field), missing resources, or
        dev cuts without references.
    """
    parsed = parse_grid(grid)
    problems = []
    unused = [k for k, _ in parsed
              if not any(config_field_path(r.config, k) is not None for r in runs)]
    if unused:
        problems.append(f"no given method has a field for the grid {', '.join(unused)}")
    points = {r.method.name: _points(r, parsed) for r in runs}
    idle = [r.method.name for r in runs if not r.method.sweeps and len(points[r.method.name]) < 2]
    if idle:
        problems.append(f"nothing to tune for {', '.join(idle)}: no scales to sweep and no "
                        "grid field with another value (give --grid FIELD=V1,V2,...)")
    if problems:
        raise ValueError("; ".join(problems))
    check_assets(runs, assets)
    for name, cuts in dev_sets.items():
        check_dev_references(name, cuts)
        check_cuts([r.method for r in runs], cuts)
    # every setting of every method decodes the same cuts: one network pass per utterance
    encoder = JobEncoder(config.batch_encoder, config.encoder_cache_mb,
                         config.lattice_cache_mb)
    inputs = JobInputs(assets)
    return [_tune(assets, dev_sets, run, points[run.method.name], Path(out_dir), config,
                  encoder, inputs)
            for run in runs]


def _tune(assets, dev_sets, run: MethodRun, points, out_dir: Path, config: DecodeConfig,
          encoder: JobEncoder, inputs: JobInputs) -> TuneResult:
    method = run.method
    candidates: list[tuple[tuple[str, ...], float]] = []
    runs_of: list[tuple[Path, Any, str]] = []  # per candidate: its run's dir, config, key
    for point in points:
        cfg = override_config(run.config, point)
        if method.sweeps:
            cfg = replace(cfg, rescore=replace(cfg.rescore, sweep=True))
        digest = hashlib.sha1(repr(cfg).encode()).hexdigest()[:12]
        where = job_folder(job_folder(out_dir / method.name) / digest)
        replace_text(where / "setting.json", json.dumps({"assignments": list(point)}) + "\n")
        rows = run_decode(assets, dev_sets, [MethodRun(method, cfg)], where, config,
                          encoder=encoder, inputs=inputs)
        for setting in method.settings(cfg):
            wers = [r.wers.get(setting.key, math.nan) for r in rows]
            candidates.append((point + setting.assignments, sum(wers) / len(wers)))
            runs_of.append((where, cfg, setting.key))
    start_wer = candidates[0][1]
    i = min(range(len(candidates)), key=lambda j: (math.isnan(candidates[j][1]),
                                                    candidates[j][1]))
    chosen, best = candidates[i]
    calibration, dev_nce = _calibrate(assets, dev_sets, method, *runs_of[i], config)
    return TuneResult(method.name, _compact(run.config, run.assignments + chosen), chosen,
                      best, start_wer, len(candidates), calibration, dev_nce)


def _calibrate(assets, dev_sets: Mapping[str, CutSet], method, where: Path, cfg: Any,
               key: str, config: DecodeConfig
               ) -> tuple[dict[str, Calibration], dict[str, tuple[float, float]]]:
    """Platt scaling of the confidences of the settings a decode with the chosen config
    reports, fit on the dev words of the run that chose it (``where``): the chosen setting
    ``key`` and the run's settings that are not points of its scale sweep (e.g. ``mbr``'s
    ``1best``)."""
    swept = {s.key for s in method.settings(cfg)}
    words: dict[str, tuple[list[float], list[bool]]] = {}
    ctm = ctm_settings(assets, config)
    for name in dev_sets:
        _, scored = ctm_words(read_results(where / method.name / f"results-{name}.jsonl"), ctm)
        for k, (confs, correct) in scored.items():
            if k == key or k not in swept:
                c, y = words.setdefault(k, ([], []))
                c += confs
                y += correct
    calibration, dev_nce = {}, {}
    for k, (confs, correct) in sorted(words.items()):
        try:
            cal = fit_calibration(confs, correct)
        except ValueError:  # every word correct, or every word wrong: nothing to fit
            logger.info("%s: no calibration for %s (its %d dev words are all correct or all "
                        "wrong)", method.name, k, len(confs))
            continue
        calibration[k] = cal
        dev_nce[k] = (normalized_cross_entropy(confs, correct),
                      normalized_cross_entropy(cal(confs).tolist(), correct))
    return calibration, dev_nce


def tuned_settings(results: Sequence[TuneResult], dev_sets: Sequence[str] = (),
                   base: DecodeSettings | None = None) -> DecodeSettings:
    """A settings file's content: ``base`` (e.g. the file tuning started from) with each
    tuned method's assignments replaced, and what tuning measured under ``tuned``."""
    base = base or DecodeSettings()
    methods = dict(base.methods)
    tuned = dict(base.tuned)
    calibration = dict(base.calibration)
    for r in results:
        methods[r.method] = r.assignments
        tuned[r.method] = {"dev_sets": list(dev_sets), "dev_wer": round(r.dev_wer, 2),
                           "start_wer": round(r.start_wer, 2), "chosen": list(r.chosen),
                           "settings_compared": r.num_settings}
        if r.dev_nce:
            tuned[r.method]["dev_nce_raw_calibrated"] = {
                k: [round(raw, 4), round(cal, 4)] for k, (raw, cal) in r.dev_nce.items()}
        calibration.pop(r.method, None)  # an old calibration belongs to the old setting
        if r.calibration:
            calibration[r.method] = dict(r.calibration)
    return DecodeSettings(base.assignments, methods, tuned, calibration)
