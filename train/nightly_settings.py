"""The nightly loop's settings: what one run does, checked at construction.

:class:`NightlySettings` is a frozen value naming the device class, dataset, state directory, night,
backend, plan sizes, steps, MLflow store and export; it validates itself (an unknown device class,
family, night, shard or step raises ``ValueError``/:class:`~tilecost.errors.SpecError` naming the
field and what is allowed) and refuses a simulated backend writing into the shipped dataset or logging
to the default MLflow store ``sqlite:///mlflow.db``. Store-level checks (an experiment holding runs of
the other kind) happen when a step opens the store (:func:`tilecost.train.nightly_train.prepare_store`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilecost.collect.backend import CUDA_BACKEND, is_simulated_backend
from tilecost.collect.plans import plan_family
from tilecost.collect.store import SHIPPED_DATASET, is_shipped_dataset
from tilecost.errors import TilecostError
from tilecost.problem import DType, Layout

from .nightly_state import parse_night, today

__all__ = [
    "CUDA_BACKEND",
    "DEFAULT_FAMILIES",
    "ExportMode",
    "NightlyError",
    "NightlySettings",
    "SHIPPED_DATASET",
    "Step",
    "is_simulated_backend",
]

DEFAULT_FAMILIES = (("random", 4), ("layers", 2), ("decode", 2), ("unaligned", 2))


class NightlyError(TilecostError):
    """The nightly loop refuses a state or dataset (simulated rows into real data, a real store for
    simulated models, a sentinel reference of the other kind)."""


class Step(enum.Enum):
    PLAN = "plan"
    SENTINELS = "sentinels"
    COLLECT = "collect"
    TRAIN = "train"
    EXPORT = "export"
    REPORT = "report"

    @classmethod
    def parse_list(cls, text: str) -> frozenset[Step]:
        """``plan,collect`` or ``all``."""
        if text.strip() == "all":
            return frozenset(cls)
        out = set()
        for name in (x.strip() for x in text.split(",") if x.strip()):
            try:
                out.add(cls(name))
            except ValueError:
                raise ValueError(
                    f"step {name!r} is not allowed; use 'all' or some of {[s.value for s in cls]}"
                ) from None
        return frozenset(out)


class ExportMode(enum.Enum):
    FULL = "full"  # export the predictor artifact (with the predictor's precomputation) when promoted
    SKIP = "skip"  # never export; the MLflow registry holds the booster


@dataclass(frozen=True)
class NightlySettings:
    """What one nightly run does. Everything has a default but the device class."""

    device_class: str = "h200"
    dataset: str = str(SHIPPED_DATASET)
    state_dir: str | None = None  # default: ./nightly, or <dataset>/../nightly-simulated when simulated
    night: str = field(default_factory=today)
    backend: str = CUDA_BACKEND
    families: tuple[tuple[str, int], ...] = DEFAULT_FAMILIES
    dtypes: tuple[DType, ...] = (DType.BF16,)
    layouts: tuple[Layout, ...] = (Layout.NT,)
    query_log: str | None = None
    max_flagged: int = 16
    model_top: int = 0  # training problems re-timed on the model's untimed favourites (nightly_plan)
    model_top_k: int = 64
    model_top_within: int = 0  # only configurations among the model's this many fastest (0: no bound)
    sentinels: int = 5
    sentinel_configs: int = 32
    sample_fraction: float = 0.35
    min_sample: int = 64
    rounds: int = 3
    workers: int | None = None
    gpus: int | None = None
    shard: tuple[int, int] | None = None
    time_budget_s: float | None = None
    steps: frozenset[Step] = frozenset(Step)
    tracking_uri: str | None = None
    model_params: tuple[tuple[str, Any], ...] = ()
    export: ExportMode = ExportMode.FULL
    export_dir: str | None = None
    export_timeout_s: float | None = 3600.0
    # Sample shapes the export's shortlists are built from, over all groups (None: prepare_artifact_files'
    # default, 384,000); fewer make a quicker, coarser artifact (a test's, a quick trial night's).
    export_samples: int | None = None
    accept_drift: bool = False

    def __post_init__(self) -> None:
        from tilecost.device import load_device

        load_device(self.device_class)  # an unknown class raises SpecError naming the known ones
        object.__setattr__(self, "night", parse_night(self.night))
        object.__setattr__(self, "export", ExportMode(self.export))
        object.__setattr__(self, "dtypes", tuple(DType.parse(d) for d in self.dtypes))
        object.__setattr__(self, "layouts", tuple(Layout.parse(x) for x in self.layouts))
        if not self.dtypes or not self.layouts:
            raise ValueError("dtypes and layouts must each name at least one value")
        for name, count in self.families:
            plan_family(name, 0, DType.BF16, Layout.NT)  # raises ValueError naming the known families
            if count < 0:
                raise ValueError(f"family {name}={count}: count must be >= 0")
        for name, low in (("max_flagged", 0), ("model_top", 0), ("model_top_k", 1), ("model_top_within", 0),
                          ("sentinel_configs", 1), ("min_sample", 1), ("rounds", 1)):  # fmt: skip
            if getattr(self, name) < low:
                raise ValueError(f"{name}={getattr(self, name)} must be >= {low}")
        if self.export_samples is not None and self.export_samples < 1:
            raise ValueError(f"export_samples={self.export_samples} must be >= 1 (or None for the export's default)")
        if not self.sentinels >= 0:
            raise ValueError(f"sentinels={self.sentinels} must be >= 0")
        if self.model_top and self.model_top_k > self.min_sample:
            raise ValueError(
                f"model_top_k={self.model_top_k} must be <= min_sample={self.min_sample}: a training problem's "
                "restricted candidates are sampled like any others, and at most min_sample are sure to be timed"
            )
        if not 0 < self.sample_fraction <= 1:
            raise ValueError(f"sample_fraction={self.sample_fraction} must be in (0, 1]")
        if self.shard is not None and not (self.shard[1] >= 1 and 0 <= self.shard[0] < self.shard[1]):
            raise ValueError(f"shard={self.shard}: need (index, count) with 0 <= index < count")
        if self.gpus is not None and self.shard is not None and self.gpus != 1:
            raise ValueError("give either shard (one GPU per task) or gpus (one process per GPU here), not both")
        if self.simulated and is_shipped_dataset(self.dataset):
            raise ValueError(
                f"dataset={self.dataset!r}: the simulated backend may not write into the shipped dataset; "
                "pass a scratch directory"
            )

    @property
    def simulated(self) -> bool:
        return is_simulated_backend(self.backend)

    @property
    def resolved_state_dir(self) -> Path:
        if self.state_dir is not None:
            return Path(self.state_dir)
        if self.simulated:
            return Path(self.dataset).parent / "nightly-simulated"
        return Path("nightly")

    @property
    def resolved_export_dir(self) -> Path:
        return Path(self.export_dir) if self.export_dir else self.resolved_state_dir / "artifact" / self.device_class

    @property
    def ranking_artifact(self) -> Path:
        """The artifact that ranks the model-top configurations: tonight's export directory once it
        holds a model (the champion), else the model shipped for the device class."""
        from .export import default_export_dir

        own = self.resolved_export_dir
        return own if (own / "metadata.json").is_file() else default_export_dir(self.device_class)

    @property
    def resolved_tracking_uri(self) -> str:
        """The MLflow store; a simulated run defaults to its own and refuses ``sqlite:///mlflow.db``
        (the stores themselves are checked by :func:`prepare_store`)."""
        from .tracking import DEFAULT_TRACKING_URI, tracking_uri

        if not self.simulated:
            return tracking_uri(self.tracking_uri)
        uri = self.tracking_uri or f"sqlite:///{(self.resolved_state_dir / 'mlflow-simulated.db').resolve()}"
        if _same_store(uri, DEFAULT_TRACKING_URI):
            raise NightlyError(
                f"tracking_uri={uri!r} is the real MLflow store; a simulated run logs to its own (default "
                f"{self.resolved_state_dir / 'mlflow-simulated.db'}) so that it never replaces the real champion"
            )
        return uri

    @property
    def label(self) -> str:
        return "SIMULATED" if self.simulated else "real"


def _same_store(a: str, b: str) -> bool:
    def key(uri: str) -> str:
        if uri.startswith("sqlite:///"):
            return str(Path(uri.removeprefix("sqlite:///")).resolve())
        return uri.rstrip("/")

    return key(a) == key(b)
