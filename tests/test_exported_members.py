"""The public surface of ``tilecost``, pinned (as httpx's ``tests/test_exported_members.py`` pins its own).

Adding or removing a public name is an API change: it should fail here and be made on purpose.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import types

import pytest

import tilecost

PUBLIC_API = [
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

# tilecost.predict's own surface (numpy only; imported inside compilers).
PREDICT_API = [
    "ARTIFACT_SCHEMA_VERSION",
    "ArtifactMetadata",
    "DispatchRule",
    "OODReason",
    "OODVerdict",
    "Prediction",
    "Predictor",
    "QueryLog",
    "Source",
    "TreeEnsemble",
    "calibrate_ood",
    "dispatch_speed",
    "fit_dispatch",
    "load_artifact",
    "parse_problem",
    "predict_best",
    "prepare_artifact_files",
    "rank",
    "save_artifact",
    "shipped_devices",
    "training_domain",
]

CORE_MODULES = ["tilecost.config", "tilecost.device", "tilecost.errors", "tilecost.problem", "tilecost.space"]


def test_all_is_exactly_the_public_api_in_sorted_order() -> None:
    assert tilecost.__all__ == PUBLIC_API
    assert tilecost.__all__ == sorted(tilecost.__all__)


def test_every_public_name_of_the_package_is_in_all() -> None:
    # Submodules become attributes when imported; they are reached by path, not re-exported.
    public = {
        name
        for name, value in vars(tilecost).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }

    assert public | {"__version__"} == set(tilecost.__all__)


def test_the_predict_package_exports_exactly_its_api() -> None:
    predict = importlib.import_module("tilecost.predict")

    assert predict.__all__ == PREDICT_API
    assert [name for name in PREDICT_API if not hasattr(predict, name)] == []


@pytest.mark.parametrize("name", PUBLIC_API)
def test_every_exported_name_imports_from_the_package(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from tilecost import {name}", namespace)  # the spelling a user writes

    assert namespace[name] is getattr(tilecost, name)


def test_exported_names_are_the_objects_their_modules_define() -> None:
    for name in PUBLIC_API:
        value = getattr(tilecost, name)
        if name != "__version__":
            assert value.__module__.startswith("tilecost."), name


def test_errors_share_one_base_and_caller_mistakes_stay_value_errors() -> None:
    for name in ("ArtifactError", "DatasetError", "NotFittedError", "SpecError", "UnsupportedError"):
        assert issubclass(getattr(tilecost, name), tilecost.TilecostError), name
    assert issubclass(tilecost.UnsupportedError, ValueError)
    assert issubclass(tilecost.NotFittedError, RuntimeError)


def test_version_matches_the_installed_distribution() -> None:
    assert tilecost.__version__ == importlib.metadata.version("tilecost")


@pytest.mark.parametrize("module_name", CORE_MODULES)
def test_each_core_module_defines_every_name_in_its_all(module_name: str) -> None:
    module = importlib.import_module(module_name)

    assert module.__all__ == sorted(module.__all__)
    assert [name for name in module.__all__ if not hasattr(module, name)] == []
