"""The predictor: the fastest configuration of a shape, from an exported artifact, in microseconds.

:class:`Predictor` is loaded once per artifact (:meth:`Predictor.load`) and answers
:meth:`~Predictor.predict_best` and :meth:`~Predictor.rank`; the module functions
:func:`predict_best` and :func:`rank` use the model shipped for a device class
(``tilecost/models/<device class>/``), loaded on first use.

A query, in order:

1. a repeated shape is answered from an LRU cache (the same frozen :class:`Prediction`);
2. a shape the artifact's ``measured.json`` holds is answered with its measured best
   (``source=Source.MEASURED``), so tilecost doubles as the tuning database; asked about another device
   class, with the same Triton release, the predictor answers a shape that class measured (the artifact's
   ``measured-<device class>.json``, ``tilecost refresh-measured --for``) with that device's own measured best
   (``Source.MEASURED``, not flagged for the device), and one only the artifact's device measured with that
   device's best (``Source.MEASURED_ON_ARTIFACT_DEVICE``, flagged ``DEVICE_MISMATCH``);
3. otherwise the first ``shortlist_width`` members of the shape's shortlist
   (:mod:`tilecost.predict.shortlist`) are masked to the feasible candidates
   (:mod:`tilecost.predict.feasibility`) and scored with the full model (:mod:`tilecost.predict.scoring`);
   when their fastest sits at position ``extend_from`` of the list or later, or fewer than
   :data:`~tilecost.predict.scoring.SMALL_HEAD` of them are feasible, the rest of the list is
   scored too; the fastest is returned with its out-of-distribution verdict (:mod:`tilecost.predict.ood`:
   the shape's distance and range, then the model-side rules on the scores just made). Without
   shortlists in the artifact, every candidate is scored. A booster fitted with per-problem centring
   (``ArtifactMetadata.level_trees``) ranks with its main trees; its level trees, which read only the
   problem's columns, are walked once on the first feasible row and added to every prediction, so the
   answer's µs are the whole booster's.

A flagged model answer is appended to the query log when one is configured (``query_log=`` or the
``TILECOST_QUERY_LOG`` environment variable; :mod:`tilecost.predict.querylog`), so that a nightly job
can measure the shapes the model was unsure about.

Device and Triton version. A predictor asked about another device class than the artifact's, or
running next to another Triton release (read from the installed distribution's metadata, without
importing triton), flags every answer with ``DEVICE_MISMATCH`` / ``TRITON_VERSION_MISMATCH``;
``strict=True`` refuses to load instead. Another Triton release gets the model's answers only (its kernels
are not the ones measured); another device class gets the artifact's measured bests where it has them, else
the model's (on 203 held-out problems that an H200 and an H100 both measured over every candidate, the H200's
best reached 0.981 of the H100's best, the H200 model's answer 0.956: docs/BENCHMARKS.md §5, fifty-third
session). Checksums, schema versions and the feature list are always checked
(:func:`~tilecost.predict.artifact.load_artifact`).
"""

from __future__ import annotations

import enum
import functools
import importlib.metadata
import json
import math
import numbers
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from tilecost.config import TileConfig
from tilecost.device import DeviceSpec, list_device_classes, load_device
from tilecost.errors import ArtifactError, SpecError
from tilecost.features import FEATURE_NAMES, FEATURE_SCHEMA_VERSION
from tilecost.problem import DType, Layout, Problem

from .artifact import ArtifactMetadata, device_measured_file, load_artifact
from .dispatch import DispatchRule
from .export import PREDICTOR_FILE, PREDICTOR_FORMAT, SHORTLISTS_FILE
from .ood import FlagRule, OODChecker, OODReason, OODVerdict
from .querylog import QUERY_LOG_ENV, QueryLog
from .scoring import CandidateSet, GroupScorer, calls_for_tail, merge_best_two
from .shortlist import EXTEND_FROM, GridSpec, ShortlistTable, space_digest
from .shortlist_archive import ShortlistArchive
from .trees import TreeEnsemble

__all__ = [
    "MEASURED_FILE",
    "Prediction",
    "Predictor",
    "Source",
    "parse_problem",
    "predict_best",
    "rank",
    "shipped_devices",
]

MEASURED_FILE = "measured.json"
_DETECT = "detect"
_KEY_TYPES = (type(None), str, DType, Layout)


class Source(enum.Enum):
    """Where an answer came from."""

    MODEL = "model"  # the model's prediction
    MEASURED = "measured"  # the artifact's measurements of this very problem (measured.json)
    # The same measurements, answering for another device class than the one that made them (flagged DEVICE_MISMATCH)
    MEASURED_ON_ARTIFACT_DEVICE = "measured_on_artifact_device"


@dataclass(frozen=True, slots=True)
class Prediction:
    """One configuration for a problem: its predicted (or measured) time and how far to trust it."""

    problem: Problem
    config: TileConfig
    time_us: float
    source: Source
    ood: OODVerdict
    # A measured answer (either measured source) is the best of the configurations the dataset timed for the
    # problem: how many (``configs_measured``) and whether they were all its feasible ones (``measured_all``).
    # None for the model's.
    configs_measured: int | None = None
    measured_all: bool | None = None

    @property
    def measured(self) -> bool:
        """Whether the answer is a measurement of this problem on this device rather than a prediction."""
        return self.source is Source.MEASURED

    def triton_config(self) -> Any:
        """The configuration as a ``triton.Config`` (imports triton, on request only)."""
        from tilecost.collect.kernels import to_triton_config

        return to_triton_config(self.config)


# The spellings a compiler passes on every call, resolved without DType.parse's loop over members.
_DTYPES: dict[object, DType] = {None: DType.BF16, **{d: d for d in DType}, **{d.value: d for d in DType}}
_LAYOUTS: dict[object, Layout] = {None: Layout.NT, **{x: x for x in Layout}, **{x.value: x for x in Layout}}


def parse_problem(shape: object, dtype: object = None, layout: object = None) -> Problem:
    """A :class:`Problem` from an ``(m, n, k)`` tuple (dtype and layout default to bf16 and nt) or a
    ``Problem`` (whose dtype and layout any given keyword must match). Caller mistakes raise
    ``TypeError``/``ValueError`` naming the field, the value and what is allowed."""
    if isinstance(shape, Problem):
        if dtype is not None and DType.parse(dtype) is not shape.dtype:
            raise ValueError(f"dtype={dtype!r} contradicts the problem's dtype {shape.dtype.value!r}; give one")
        if layout is not None and Layout.parse(layout) is not shape.layout:
            raise ValueError(f"layout={layout!r} contradicts the problem's layout {shape.layout.value!r}; give one")
        return shape
    if not isinstance(shape, (tuple, list)) or len(shape) != 3:
        raise TypeError(f"shape must be an (m, n, k) tuple of ints or a tilecost.Problem, got {shape!r}")
    m, n, k = shape  # checked by Problem (tilecost.problem.parse_dim), field by field
    parsed_dtype = _lookup(_DTYPES, dtype) or DType.parse(dtype)
    return Problem(m, n, k, parsed_dtype, _lookup(_LAYOUTS, layout) or Layout.parse(layout))


def _lookup(table: Mapping[object, Any], value: object) -> Any:
    """``table.get(value)``, None for an unhashable value (which the enum's parse then refuses, naming its field)."""
    try:
        return table.get(value)
    except TypeError:
        return None


# Candidate sets (a list's feature and integer columns, ~12 KB for 50 members) kept per group: for rank, the numpy
# path, and the rest of a list that the compiled path's answer calls for (_Group.best).
_SUBSETS_KEPT = 1024


class _Cut:
    """One list's candidate sets: the head scored first and its late members (list order); the tail, and
    the whole list, are built the first time a query needs them."""

    __slots__ = ("head", "late", "tail_indices", "_scorer", "_tail", "_whole")

    def __init__(self, scorer: GroupScorer, head: CandidateSet, late: np.ndarray, tail_indices: np.ndarray) -> None:
        self.head, self.late, self.tail_indices, self._scorer = head, late, tail_indices, scorer
        self._tail: CandidateSet | None = None
        self._whole: CandidateSet | None = None

    def tail(self) -> CandidateSet:
        if self._tail is None:
            self._tail = self._scorer.subset(np.sort(self.tail_indices))
        return self._tail

    def whole(self) -> CandidateSet:
        if self._whole is None:
            self._whole = self._scorer.subset(np.sort(np.concatenate([self.head.indices, self.tail_indices])))
        return self._whole


@dataclass(eq=False)
class _Group:
    """A (dtype, layout) group's scorer and shortlists, with the candidate sets built so far."""

    scorer: GroupScorer
    shortlist: ShortlistTable | None
    width: int | None  # members of a list scored first (None: all)
    extend_from: int | None  # a head best at this list position or later has the rest of the list scored
    subsets: OrderedDict[int | tuple[int, int], _Cut]
    lock: threading.Lock

    def cut(self, problem: Problem) -> _Cut | None:
        """The problem's list as candidate sets (None without shortlists: every candidate is scored)."""
        if self.shortlist is None:
            return None
        list_id, parts = self.shortlist.problem_cut(problem, self.width, self.extend_from)
        cut = self.subsets.get(list_id)
        if cut is None:
            cut = _Cut(self.scorer, self.scorer.subset(parts.head), parts.late, parts.tail)
            with self.lock:
                self.subsets[list_id] = cut
                if len(self.subsets) > _SUBSETS_KEPT:
                    self.subsets.popitem(last=False)
        return cut

    def choose(self, problem: Problem) -> tuple[tuple[int, float, float | None] | None, _Cut | None, bool]:
        """The answer from the problem's list (extended past the head when its best sits late), the list's
        cut and whether it was extended; from every candidate (cut None) without shortlists or when the
        list has no feasible member."""
        cut = self.cut(problem)
        if cut is not None:
            tail = cut.tail if len(cut.tail_indices) else None
            found, extended = self.scorer.best_two_extending(problem, cut.head, cut.late, tail)
            if found is not None:
                return found, cut, extended
            # a shape clipped into an edge cell may find no feasible member there
        return self.scorer.best_two(problem, self.scorer.everything), None, False

    def best(self, problem: Problem) -> tuple[int, float, float | None] | None:
        """What :meth:`choose` answers. With the compiled path, the head goes to the kernel straight from the list
        (no candidate set, no cache of cuts: most new shapes' lists are new to it), and the rest of the list is
        scored, as :meth:`GroupScorer.best_two_extending` does, only when the head's answer calls for it."""
        if self.shortlist is None or self.width is None or self.scorer.compiled is None:
            return self.choose(problem)[0]
        _, parts = self.shortlist.problem_cut(problem, self.width, self.extend_from)
        found, count = self.scorer.compiled_best_two(problem, parts.head)
        if found is None:  # no feasible member: choose scores every candidate
            return self.choose(problem)[0]
        if not len(parts.tail) or not calls_for_tail(found, count, parts.late):
            return found
        cut = self.cut(problem)
        assert cut is not None  # a shortlist gives a cut
        return merge_best_two(found, self.scorer.best_two(problem, cut.tail()))

    def answered_from(self, problem: Problem) -> CandidateSet:
        """The candidates :meth:`choose` took its answer from."""
        _, cut, extended = self.choose(problem)
        if cut is None:
            return self.scorer.everything
        return cut.whole() if extended else cut.head


class Predictor:
    """Answers for one artifact. Build with :meth:`load`; the constructor only stores its parts."""

    def __init__(
        self,
        metadata: ArtifactMetadata,
        ensemble: TreeEnsemble,
        device: DeviceSpec,
        ood: OODChecker,
        measured: Mapping[str, Mapping[str, Any]],
        groups: Mapping[str, Mapping[str, Any]],
        shortlists: Mapping[str, ShortlistTable],
        cache_size: int = 4096,
        *,
        shortlist_width: int | None = None,
        extend_from: int | None = EXTEND_FROM,
        query_log: str | Path | QueryLog | None = None,
        level: TreeEnsemble | None = None,
        measured_here: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.metadata = metadata
        self.ensemble = ensemble  # the trees that rank (all of the booster's but its level trees)
        self.level = level  # the booster's per-problem level trees (metadata.level_trees), or None
        self.device = device
        self.ood = ood
        self.measured = measured  # the artifact device's measured bests (measured.json)
        # The measured bests of the device answered for, when it is not the artifact's (measured-<class>.json)
        self.measured_here: Mapping[str, Mapping[str, Any]] = measured_here or {}
        self._group_specs = groups
        self._shortlists = shortlists
        self._cache_size = cache_size
        self.shortlist_width = shortlist_width
        self.extend_from = extend_from
        if query_log is None:
            query_log = os.environ.get(QUERY_LOG_ENV) or None
        self.query_log = query_log if query_log is None or isinstance(query_log, QueryLog) else QueryLog(query_log)
        self._cache: OrderedDict[Any, Prediction] = OrderedDict()
        self._groups: dict[tuple[DType, Layout], _Group] = {}
        self._lock = threading.Lock()

    # ----------------------------------------------------------------------------------- loading
    @classmethod
    def load(
        cls,
        source: str | Path = "h200",
        *,
        device: str | DeviceSpec | None = None,
        strict: bool = False,
        triton_version: str | None = _DETECT,
        cache_size: int = 4096,
        shortlist_width: int | None = None,
        extend_from: int | None = EXTEND_FROM,
        query_log: str | Path | QueryLog | None = None,
    ) -> Predictor:
        """Load an artifact: a device class with a shipped model (``"h200"``) or an artifact directory.

        ``device``: the device the answers are for (default: the artifact's device class).
        ``shortlist_width``: how many members of a shape's shortlist to score (default: the width the
        artifact recommends, ``validation.default_width`` in ``predictor.json``); more is slower and
        agrees more often with scoring every candidate (the export's ``validation.containment``).
        ``extend_from``: when the best of those members sits at this position of the list or later
        (0 is the list's first), the rest of the list is scored too (default
        :data:`~tilecost.predict.shortlist.EXTEND_FROM`; None: never).
        ``query_log``: a path (or :class:`QueryLog`) to append flagged model answers to (default: the
        ``TILECOST_QUERY_LOG`` environment variable; unset: no log).
        ``triton_version``: the Triton release kernels will run with (default: the installed one,
        ``None`` when unknown). A mismatch of either flags every verdict, or with ``strict=True``
        raises :class:`~tilecost.errors.ArtifactError`, as do corrupted or mismatched artifacts.
        """
        _check_load_options(shortlist_width, extend_from, cache_size, query_log)
        directory = _artifact_directory(source)
        metadata, blobs = load_artifact(directory, FEATURE_NAMES, FEATURE_SCHEMA_VERSION)
        ensemble = TreeEnsemble.from_model(blobs[metadata.model_file], tuple(metadata.feature_names))
        level = None
        if metadata.level_trees:  # the last trees give each problem's level: walked once per query, not per row
            if metadata.level_trees >= ensemble.num_trees:
                raise ArtifactError(
                    f"{directory}: metadata says {metadata.level_trees} level trees; "
                    f"the booster has {ensemble.num_trees} trees in all"
                )
            level = ensemble.last_trees(metadata.level_trees)
            ensemble = ensemble.first_trees(ensemble.num_trees - metadata.level_trees)
            _ = level.compiled
        _ = ensemble.compiled  # with numba: import it and compile (or load) the kernel now, not mid-query
        try:
            spec = load_device(metadata.device_class if device is None else device)
        except (ValueError, SpecError) as exc:
            if device is not None:  # the caller's own argument: its error stands
                raise
            raise ArtifactError(
                f"{directory}: metadata.json's device_class {metadata.device_class!r} has no device spec in this "
                f"tilecost ({exc}); pass device= to say which device the answers are for"
            ) from exc
        if triton_version == _DETECT:
            triton_version = _installed_triton()
        static = _mismatches(metadata, spec, triton_version)
        if strict and static:
            raise ArtifactError(
                f"{directory}: artifact is for {metadata.device_class} with Triton {metadata.triton_version}; "
                f"asked for {spec.device_class} with Triton {triton_version} ({', '.join(r.value for r in static)})"
            )
        measured = _read_measured(blobs.get(MEASURED_FILE))
        measured_here = _device_measured(blobs, spec.device_class) if spec.device_class != metadata.device_class else {}
        groups, shortlists, rules = _read_shortlists(blobs.get(PREDICTOR_FILE), blobs.get(SHORTLISTS_FILE))
        ood = OODChecker.from_metadata(metadata.domain, metadata.ood, static).with_rules(rules).with_compiled_distance()
        return cls(metadata, ensemble, spec, ood, measured, groups, shortlists, cache_size,
                   shortlist_width=shortlist_width, extend_from=extend_from, query_log=query_log,
                   level=level, measured_here=measured_here)  # fmt: skip

    def _group(self, dtype: DType, layout: Layout) -> _Group:
        group = self._groups.get((dtype, layout))
        if group is None:
            with self._lock:
                group = self._groups.get((dtype, layout)) or self._build_group(dtype, layout)
                self._groups[(dtype, layout)] = group
        return group

    def _build_group(self, dtype: DType, layout: Layout) -> _Group:
        level = self.level
        scorer = GroupScorer.build(
            self.device, dtype, layout, self.metadata.target, self.ensemble.predict, self.ensemble.compiled,
            level=None if level is None else level.predict, compiled_level=None if level is None else level.compiled,
        )  # fmt: skip
        name = f"{dtype.value}-{layout.value}"
        shortlist = self._shortlists.get(name)
        if shortlist is not None:
            spec = self._group_specs[name]
            if spec.get("space_sha256") != space_digest(scorer.space):
                raise ArtifactError(
                    f"the {name} candidate space of this tilecost differs from the one the artifact's shortlists "
                    f"index ({spec.get('space_size')} configs then, {len(scorer.space)} now); re-export the artifact"
                )
            shortlist.check_space(len(scorer.space))
        width = self.shortlist_width
        if width is None and shortlist is not None:
            width = self._group_specs[name].get("validation", {}).get("default_width")
        return _Group(scorer, shortlist, width, self.extend_from, OrderedDict(), threading.Lock())

    # ----------------------------------------------------------------------------------- queries
    def predict_best(
        self, shape: object, *, dtype: object = None, layout: object = None, measured: bool = True
    ) -> Prediction:
        """The fastest configuration of ``shape`` (an ``(m, n, k)`` tuple or a ``Problem``).

        ``measured=False`` answers from the model even where the artifact measured the problem.
        """
        key = (shape, dtype, layout, measured) if type(measured) is bool and _cacheable(shape, dtype, layout) else None
        if key is not None:
            hit = self._cache.get(key)
            if hit is not None:
                try:  # noqa: SIM105  (contextlib.suppress costs ~0.5 µs of a ~1 µs cache hit)
                    self._cache.move_to_end(key)  # least recently used goes first
                except KeyError:  # evicted by another thread meanwhile
                    pass
                return hit
        problem = parse_problem(shape, dtype, layout)
        _check_measured(measured)
        answer = self._cache.get((problem, measured))
        if answer is None:
            answer = self._answer(problem, measured)
            self._remember((problem, measured), answer)
        if key is not None:
            self._remember(key, answer)
        return answer

    def rank(
        self,
        shape: object,
        k: int = 5,
        *,
        dtype: object = None,
        layout: object = None,
        exhaustive: bool = False,
        measured: bool = True,
    ) -> tuple[Prediction, ...]:
        """The ``k`` fastest configurations of ``shape``, fastest first.

        From the shape's shortlist unless ``exhaustive`` (or the shortlist has fewer than ``k``
        feasible members), then from every candidate. A measured problem's measured best comes first
        unless ``measured=False``. Where the first is the configuration :meth:`predict_best` answers
        (``measured=False``), it is that same :class:`Prediction`.
        """
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"k={k!r} is not allowed; use an int >= 1")
        if not isinstance(exhaustive, bool):
            raise TypeError(f"exhaustive={exhaustive!r} is not allowed; use True or False")
        _check_measured(measured)
        problem = parse_problem(shape, dtype, layout)
        group = self._group(problem.dtype, problem.layout)
        candidates = group.scorer.everything if exhaustive else group.answered_from(problem)
        indices, times = group.scorer.ranked(problem, candidates)
        if len(indices) < k and candidates is not group.scorer.everything:
            indices, times = group.scorer.ranked(problem)
        answer = self.predict_best(problem, measured=False)
        verdict = answer.ood  # the model's verdict, as predict_best gives it
        space = group.scorer.space
        out = [
            Prediction(problem, space[i], float(t), Source.MODEL, verdict)
            for i, t in zip(indices[:k], times[:k], strict=True)
        ]
        if out and out[0].config == answer.config:
            # predict_best's own answer: it scores the head and the tail of a list apart, rank the whole set at
            # once, so their sums of the same trees could differ in the last bit of time_us. A follower tied
            # with the answer (the same sum) could then come out a bit faster than it: it gets the answer's
            # time, so that the ranking stays fastest first
            out = [answer, *(p if p.time_us >= answer.time_us else replace(p, time_us=answer.time_us) for p in out[1:])]
        best = self._measured(problem, self.ood.verdict(problem)) if measured else None
        if best is not None:
            out = [best, *(p for p in out if p.config != best.config)][:k]
        return tuple(out)

    def predicted_times_us(self, problem: Problem) -> dict[TileConfig, float]:
        """The model's time for every candidate of ``problem`` (for autotuners' perf models)."""
        group = self._group(problem.dtype, problem.layout)
        indices, times = group.scorer.times_us(problem, group.scorer.everything)
        return {group.scorer.space[i]: float(t) for i, t in zip(indices, times, strict=True)}

    def dispatch_rule(self, dtype: object = "bf16", layout: object = "nt") -> DispatchRule:
        """The run-time dispatch rule exported for a dtype and layout (:mod:`tilecost.predict.dispatch`)."""
        name = f"{DType.parse(dtype).value}-{Layout.parse(layout).value}"
        spec = self._group_specs.get(name)
        if spec is None or "dispatch" not in spec:
            raise ArtifactError(f"the artifact has no dispatch rule for {name}; it has {sorted(self._group_specs)}")
        return DispatchRule.from_dict(spec["dispatch"])

    def _answer(self, problem: Problem, use_measured: bool) -> Prediction:
        verdict = self.ood.verdict(problem)
        measured = self._measured(problem, verdict) if use_measured else None
        if measured is not None:
            return measured
        group = self._group(problem.dtype, problem.layout)
        found = group.best(problem)  # ties: the first in space order
        if found is None:
            raise ValueError(f"{problem.key}: no configuration of the candidate space is feasible")
        best, best_us, second_us = found
        verdict = self.ood.judge(problem, verdict, best_us, second_us)
        answer = Prediction(problem, group.scorer.space[best], best_us, Source.MODEL, verdict)
        if verdict and self.query_log is not None:
            self.query_log.record(problem, verdict)
        return answer

    def _measured(self, problem: Problem, verdict: OODVerdict) -> Prediction | None:
        """The artifact's measured best of ``problem``: as a measurement when the predictor answers for the device
        class and Triton release that measured it; answering for another device class, that class's own measured
        best where the artifact holds one (a measurement, its verdict without ``DEVICE_MISMATCH``), else the
        artifact device's (the verdict flags ``DEVICE_MISMATCH``); None under another Triton release, whose kernels
        are not the ones measured (then the model answers, flagged)."""
        static = self.ood.static_reasons
        entry = self.measured_here.get(problem.key) if static == (OODReason.DEVICE_MISMATCH,) else None
        if entry is not None:  # measured on the very device answered for: nothing to flag about the device
            source = Source.MEASURED
            reasons = tuple(r for r in verdict.reasons if r is not OODReason.DEVICE_MISMATCH)
            verdict = OODVerdict(reasons, verdict.neighbour_distance_log2)
        else:
            entry = self.measured.get(problem.key)
            if entry is None:
                return None
            if not static:
                source = Source.MEASURED
            elif static == (OODReason.DEVICE_MISMATCH,):
                source = Source.MEASURED_ON_ARTIFACT_DEVICE
            else:
                return None
        return Prediction(
            problem, TileConfig.from_key(entry["config_id"]), float(entry["time_us"]), source, verdict,
            configs_measured=entry.get("configs_measured"), measured_all=entry.get("complete"),
        )  # fmt: skip

    def _remember(self, key: Any, answer: Prediction) -> None:
        with self._lock:
            self._cache[key] = answer
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def cache_clear(self) -> None:
        """Forget every cached answer (the loaded model stays)."""
        with self._lock:
            self._cache.clear()


def _cacheable(shape: object, dtype: object, layout: object) -> bool:
    """Whether the raw arguments can key the cache before validation: exact ints only, so that 4096.0,
    True or NaN never hit an entry of 4096 or 1 and skip the checks."""
    if type(dtype) not in _KEY_TYPES or type(layout) not in _KEY_TYPES:
        return False
    if type(shape) is Problem:
        return True
    return type(shape) is tuple and len(shape) == 3 and all(type(x) is int for x in shape)  # type: ignore[arg-type]


def _artifact_directory(source: str | Path) -> Path:
    """A ``Path`` is a directory; a string is a shipped device class when one has that name (so a folder named
    ``h200`` in the working directory never stands in for the shipped model: pass ``Path("h200")`` or
    ``"./h200"`` for it), else a directory when it looks like a path or names one."""
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"source must be a device class or an artifact directory, got {type(source).__name__}")
    shipped = shipped_devices()
    if isinstance(source, str) and source in shipped:
        return Path(str(resources.files("tilecost") / "models" / source))
    if isinstance(source, str) and os.sep not in source and "/" not in source and not Path(source).is_dir():
        hint = ""
        if source in list_device_classes() and shipped:
            # A known device without its own model (h100_sxm): another device's artifact can answer, flagged.
            hint = (f"; or Predictor.load({shipped[0]!r}, device={source!r}) for the {shipped[0]} artifact's answers "
                    "(that device's measured bests where it holds them; else its own, else its model's, flagged "
                    "device_mismatch)")  # fmt: skip
        raise ValueError(
            f"device={source!r} has no shipped model; use one of {shipped} or Predictor.load(directory){hint}"
        )
    directory = Path(source)
    if not directory.is_dir():
        raise ArtifactError(f"{directory}: no such artifact directory")
    return directory


def _check_load_options(shortlist_width: object, extend_from: object, cache_size: object, query_log: object) -> None:
    """:meth:`Predictor.load`'s keyword arguments, refused at load rather than at the first query."""
    if shortlist_width is not None and (type(shortlist_width) is not int or shortlist_width < 1):
        raise ValueError(f"shortlist_width={shortlist_width!r} is not allowed; use an int >= 1 or None")
    if extend_from is not None and (type(extend_from) is not int or extend_from < 0):
        raise ValueError(f"extend_from={extend_from!r} is not allowed; use an int >= 0 or None")
    if type(cache_size) is not int or cache_size < 0:
        raise ValueError(f"cache_size={cache_size!r} is not allowed; use an int >= 0 (0: no cache)")
    if query_log is not None and not isinstance(query_log, (str, os.PathLike, QueryLog)):
        raise TypeError(f"query_log={query_log!r} is not allowed; use a path, a QueryLog or None")


def _check_measured(measured: object) -> None:
    if type(measured) is not bool:
        raise TypeError(f"measured={measured!r} is not allowed; use True or False")


def shipped_devices() -> list[str]:
    """Device classes with a model under ``tilecost/models/``, sorted."""
    folder = resources.files("tilecost") / "models"
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and (p / "metadata.json").is_file())


def _installed_triton() -> str | None:
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return None


def _mismatches(metadata: ArtifactMetadata, device: DeviceSpec, triton_version: str | None) -> tuple[OODReason, ...]:
    reasons = []
    sm_count = metadata.fingerprint.get("sm_count")
    if device.device_class != metadata.device_class or (sm_count is not None and int(sm_count) != device.sm_count):
        reasons.append(OODReason.DEVICE_MISMATCH)
    if triton_version is not None and triton_version != metadata.triton_version:
        reasons.append(OODReason.TRITON_VERSION_MISMATCH)
    return tuple(reasons)


def _read_measured(blob: bytes | Any | None, name: str = MEASURED_FILE) -> dict[str, Mapping[str, Any]]:
    """``measured.json``: ``{problem key: {"config_id", "time_us", "complete", "configs_measured"}}`` (its bytes, or
    the table already parsed)."""
    if blob is None:
        return {}
    try:
        data = json.loads(blob) if isinstance(blob, bytes) else blob
        configs = set()  # ~4 problems a configuration: each key is parsed (and so checked) once
        for key, entry in data.items():
            configs.add(entry["config_id"])
            if not (
                isinstance(entry["time_us"], (int, float)) and math.isfinite(entry["time_us"]) and entry["time_us"] > 0
            ):
                raise ValueError(f"{key}: time_us={entry['time_us']!r} is not a positive number")
        for config in configs:
            TileConfig.from_key(config)
    except (json.JSONDecodeError, RecursionError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ArtifactError(f"{name} is malformed: {exc!r}") from exc
    return data


def _device_measured(blobs: Mapping[str, bytes], device_class: str) -> dict[str, Mapping[str, Any]]:
    """The measured bests the artifact holds for ``device_class``, another class than its own (none: ``{}``). A spec
    may name its class in ways no artifact file is named for (``DeviceSpec`` allows upper case): none, then."""
    try:
        name = device_measured_file(device_class)
    except ValueError:
        return {}
    return _read_device_measured(blobs[name], name, device_class) if name in blobs else {}


def _read_device_measured(blob: bytes, name: str, device_class: str) -> dict[str, Mapping[str, Any]]:
    """Another device class's measured bests (:func:`~tilecost.predict.artifact.device_measured_file`): its
    ``problems`` table, read as ``measured.json`` is, once the file names ``device_class`` as its device."""
    try:
        data = json.loads(blob)
        named = data["device_class"]
        problems = data["problems"]
    except (json.JSONDecodeError, RecursionError, KeyError, TypeError) as exc:
        raise ArtifactError(f"{name} is malformed: {exc!r}") from exc
    if named != device_class:
        raise ArtifactError(f"{name} holds device_class={named!r}, not {device_class!r}")
    return _read_measured(problems, name)


def _read_shortlists(
    header: bytes | None, arrays: bytes | None
) -> tuple[dict[str, Mapping[str, Any]], Mapping[str, ShortlistTable], tuple[FlagRule, ...]]:
    if header is None:
        return {}, {}, ()
    try:
        described = json.loads(header)
        if described.get("format") != PREDICTOR_FORMAT:
            raise ArtifactError(
                f"{PREDICTOR_FILE} format {described.get('format')!r}; this tilecost reads {PREDICTOR_FORMAT} "
                "(re-export the artifact)"
            )
        groups = described["groups"]
        tables: Mapping[str, ShortlistTable] = {}
        if arrays is not None:  # each group's arrays are read on its first query (shortlist_archive.py)
            grids = {name: GridSpec.from_dict(spec["grid"]) for name, spec in groups.items()}
            tables = ShortlistArchive(arrays, grids, SHORTLISTS_FILE)
        rules = tuple(FlagRule.from_dict(rule) for rule in described.get("ood", {}).get("rules", ()))
    except (json.JSONDecodeError, RecursionError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ArtifactError(f"{PREDICTOR_FILE} or {SHORTLISTS_FILE} is malformed: {exc!r}") from exc
    return groups, tables, rules


@functools.cache
def _shipped(device: str) -> Predictor:
    return Predictor.load(device)


def _shipped_predictor(device: object) -> Predictor:
    if type(device) is not str:
        raise TypeError(f"device must be a device class name such as 'h200', got {type(device).__name__} {device!r}")
    return _shipped(device)


def predict_best(
    shape: object, *, dtype: object = None, layout: object = None, device: object = "h200", measured: bool = True
) -> Prediction:
    """The fastest configuration of ``shape`` on ``device`` by its shipped model.

    ``shape``: an ``(m, n, k)`` tuple of ints or a :class:`~tilecost.Problem`; ``dtype`` defaults to
    bf16 and ``layout`` to nt for tuples. See :class:`Prediction` for what comes back.
    """
    return _shipped_predictor(device).predict_best(shape, dtype=dtype, layout=layout, measured=measured)


def rank(
    shape: object, k: int = 5, *, dtype: object = None, layout: object = None, device: object = "h200"
) -> tuple[Prediction, ...]:
    """The ``k`` fastest configurations of ``shape`` on ``device``, fastest first (:meth:`Predictor.rank`)."""
    return _shipped_predictor(device).rank(shape, k, dtype=dtype, layout=layout)
