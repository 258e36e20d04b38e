"""tilecost: a learned cost model that picks the fastest Triton matmul configuration for a shape."""

from tilecost.config import KernelVariant, TileConfig
from tilecost.device import DeviceSpec, list_device_classes, load_device
from tilecost.errors import ArtifactError, DatasetError, NotFittedError, SpecError, TilecostError, UnsupportedError
from tilecost.predict import OODReason, OODVerdict, Prediction, Predictor, Source, predict_best, rank
from tilecost.problem import DType, Layout, Problem
from tilecost.space import config_space, problem_candidates

__version__ = "0.1.0"

__all__ = [
    "ArtifactError",
    "DType",
    "DatasetError",
    "DeviceSpec",
    "KernelVariant",
    "Layout",
    "NotFittedError",
    "OODReason",
    "OODVerdict",
    "Prediction",
    "Predictor",
    "Problem",
    "Source",
    "SpecError",
    "TileConfig",
    "TilecostError",
    "UnsupportedError",
    "__version__",
    "config_space",
    "list_device_classes",
    "load_device",
    "predict_best",
    "problem_candidates",
    "rank",
]
