"""Device specs: hardware read from data files into a validated, hashable ``DeviceSpec``.

Checked here: both shipped specs load with the numbers their sources give, a spec loads from any JSON
path, every malformation is a ``SpecError`` that names the offending key, an unknown class is a
``ValueError`` listing the known ones, and CUDA device names map to classes by exact name.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tilecost import DType, SpecError, list_device_classes, load_device
from tilecost.device import device_class_for_gpu_name

SHIPPED_H200 = Path(__file__).resolve().parents[1] / "tilecost" / "devices" / "h200.json"


def _h200_data() -> dict[str, Any]:
    """A fresh, mutable copy of the shipped H200 spec's JSON."""
    return json.loads(SHIPPED_H200.read_text())


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(data))
    return path


# --- the shipped specs ----------------------------------------------------------------------------


def test_h200_spec_holds_the_numbers_read_off_the_device() -> None:
    spec = load_device("h200")

    assert spec.device_class == "h200"
    assert spec.name == "NVIDIA H200"
    assert spec.compute_capability == (9, 0)
    assert spec.sm_count == 132
    assert spec.smem_per_block_bytes == 232_448  # 227 KiB opt-in
    assert spec.smem_per_sm_bytes == 233_472  # 228 KiB
    assert spec.registers_per_sm == 65_536
    assert spec.max_registers_per_thread == 255
    assert spec.max_threads_per_block == 1024
    assert spec.max_threads_per_sm == 2048
    assert spec.max_blocks_per_sm == 32
    assert spec.l2_bytes == 62_914_560  # 60 MiB
    assert spec.hbm_bytes == 150_323_855_360  # 140 GiB
    assert spec.hbm_bandwidth_gbps == 4800
    assert spec.sm_clock_mhz == 1980
    assert dict(spec.peak_dense_tflops) == {
        DType.FP16: 989.4,
        DType.BF16: 989.4,
        DType.FP32: 494.7,
        DType.FP8: 1978.9,
    }


def test_h100_sxm_spec_differs_from_h200_in_memory_only() -> None:
    h100, h200 = load_device("h100_sxm"), load_device("h200")

    assert h100.device_class == "h100_sxm"
    assert h100.name == "NVIDIA H100 80GB HBM3"
    assert h100.l2_bytes == 52_428_800  # 50 MiB
    assert h100.hbm_bytes == 85_899_345_920  # 80 GiB
    assert h100.hbm_bandwidth_gbps == 3350
    # the same SMs: same count, shared memory, registers and peak rates
    same = dataclasses.replace(h200, device_class="h100_sxm", name=h100.name, l2_bytes=h100.l2_bytes)
    assert dataclasses.replace(same, hbm_bytes=h100.hbm_bytes, hbm_bandwidth_gbps=3350) == h100


def test_rates_in_si_units() -> None:
    spec = load_device("h200")

    assert spec.peak_flops_per_s(DType.BF16) == pytest.approx(989.4e12)
    assert spec.peak_flops_per_s(DType.FP8) == pytest.approx(1978.9e12)
    assert spec.hbm_bytes_per_s == pytest.approx(4.8e12)


def test_list_device_classes_is_sorted_and_each_class_loads_under_its_own_key() -> None:
    classes = list_device_classes()

    assert {"h100_sxm", "h200"} <= set(classes)
    assert classes == sorted(classes)
    assert [load_device(c).device_class for c in classes] == classes


def test_each_shipped_spec_names_a_gpu_that_maps_back_to_it() -> None:
    for device_class in list_device_classes():
        assert device_class_for_gpu_name(load_device(device_class).name) == device_class


def test_device_class_keys_are_case_insensitive_and_a_spec_passes_through() -> None:
    spec = load_device("h200")

    assert load_device("H200") == spec
    assert load_device(spec) is spec


def test_peak_rates_are_read_only() -> None:
    spec = load_device("h200")

    with pytest.raises(TypeError):
        spec.peak_dense_tflops[DType.BF16] = 1.0  # type: ignore[index]


def test_a_spec_is_frozen_hashable_and_equal_by_value(tmp_path: Path) -> None:
    spec = load_device("h200")
    copy = load_device(_write(tmp_path, _h200_data()))

    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.sm_count = 108  # type: ignore[misc]
    assert copy == spec
    assert hash(copy) == hash(spec)
    assert {spec: "cached"}[copy] == "cached"
    assert len({spec, load_device("h100_sxm")}) == 2


# --- loading from a path --------------------------------------------------------------------------


def test_a_spec_loads_from_a_json_path_given_as_path_or_string(tmp_path: Path) -> None:
    data = _h200_data()
    data.update(device_class="test_gpu", name="Test GPU", sm_count=100)
    path = _write(tmp_path, data)

    for given in (path, str(path)):
        spec = load_device(given)
        assert (spec.device_class, spec.name, spec.sm_count) == ("test_gpu", "Test GPU", 100)


def test_sources_are_optional(tmp_path: Path) -> None:
    data = _h200_data()
    del data["sources"]

    assert load_device(_write(tmp_path, data)) == load_device("h200")


def test_a_missing_file_is_a_spec_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"

    with pytest.raises(SpecError, match=f"{path} does not exist"):
        load_device(path)


def test_invalid_json_is_a_spec_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"sm_count": 132,')

    with pytest.raises(SpecError, match="invalid JSON"):
        load_device(path)


# --- malformed specs ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["sm_count", "smem_per_block_bytes", "peak_dense_tflops", "compute_capability", "name"])
def test_a_missing_key_is_named(tmp_path: Path, key: str) -> None:
    data = _h200_data()
    del data[key]

    with pytest.raises(SpecError, match=rf"lacks \['{key}'\]"):
        load_device(_write(tmp_path, data))


def test_an_unknown_key_is_named_so_a_typo_cannot_leave_a_default(tmp_path: Path) -> None:
    data = _h200_data()
    data["sm_cuont"] = 132

    with pytest.raises(SpecError, match=r"unknown keys \['sm_cuont'\]"):
        load_device(_write(tmp_path, data))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sm_count", -132),
        ("sm_count", 0),
        ("sm_count", 132.0),
        ("sm_count", "132"),
        ("sm_count", True),
        ("smem_per_block_bytes", -1),
        ("registers_per_sm", None),
        ("hbm_bandwidth_gbps", -4800),
        ("hbm_bandwidth_gbps", 0),
        ("sm_clock_mhz", "1980"),
    ],
)
def test_a_bad_number_is_named_with_its_value(tmp_path: Path, key: str, value: object) -> None:
    data = _h200_data()
    data[key] = value

    with pytest.raises(SpecError, match=rf"^h200: {key}={value!r} must be a positive"):
        load_device(_write(tmp_path, data))


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32", "fp8e4m3"])
def test_a_missing_peak_rate_names_the_dtype(tmp_path: Path, dtype: str) -> None:
    data = _h200_data()
    del data["peak_dense_tflops"][dtype]

    with pytest.raises(SpecError, match=rf"peak_dense_tflops lacks {dtype}$"):
        load_device(_write(tmp_path, data))


def test_a_peak_rate_for_an_unknown_dtype_is_named(tmp_path: Path) -> None:
    data = _h200_data()
    data["peak_dense_tflops"]["fp4"] = 4000

    with pytest.raises(SpecError, match=r"dtype='fp4' is not allowed"):
        load_device(_write(tmp_path, data))


@pytest.mark.parametrize("value", [[9], [9, 0, 1], "nine", None])
def test_a_bad_compute_capability_is_a_spec_error(tmp_path: Path, value: object) -> None:
    data = _h200_data()
    data["compute_capability"] = value

    with pytest.raises(SpecError):
        load_device(_write(tmp_path, data))


@pytest.mark.parametrize("device_class", ["", "h200-sxm", "h 200"])
def test_a_device_class_that_is_not_a_key_is_refused(tmp_path: Path, device_class: str) -> None:
    data = _h200_data()
    data["device_class"] = device_class

    with pytest.raises(SpecError, match=re.escape(f"device_class={device_class!r}")):
        load_device(_write(tmp_path, data))


@pytest.mark.parametrize("peak", [0, -989.4, "nan"])
def test_a_non_positive_peak_rate_is_a_spec_error(tmp_path: Path, peak: object) -> None:
    data = _h200_data()
    data["peak_dense_tflops"]["bf16"] = peak

    with pytest.raises(SpecError, match="bf16"):
        load_device(_write(tmp_path, data))


@pytest.mark.parametrize("document", [None, 5])
def test_a_json_document_that_is_not_an_object_is_a_spec_error(tmp_path: Path, document: object) -> None:
    with pytest.raises(SpecError):
        load_device(_write(tmp_path, document))


def test_a_non_string_device_class_is_a_spec_error(tmp_path: Path) -> None:
    data = _h200_data()
    data["device_class"] = 200

    with pytest.raises(SpecError, match="device_class"):
        load_device(_write(tmp_path, data))


@pytest.mark.parametrize("value", [[9.5, 0], "90"])
def test_a_compute_capability_that_is_not_two_ints_is_a_spec_error(tmp_path: Path, value: object) -> None:
    data = _h200_data()
    data["compute_capability"] = value

    with pytest.raises(SpecError, match="compute_capability"):
        load_device(_write(tmp_path, data))


# --- device classes and GPU names -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["b200", "a100", "h200_nvl", "h200.jsonx"])
def test_an_unknown_device_class_is_a_value_error_listing_the_known_ones(name: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"device={name!r} is not a known device class")) as info:
        load_device(name)
    assert str(list_device_classes()) in str(info.value)
    assert not isinstance(info.value, SpecError)


@pytest.mark.parametrize(
    ("gpu_name", "device_class"),
    [("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100_sxm"), ("  NVIDIA H200\n", "h200")],
)
def test_cuda_device_names_map_to_device_classes(gpu_name: str, device_class: str) -> None:
    assert device_class_for_gpu_name(gpu_name) == device_class


@pytest.mark.parametrize("gpu_name", ["NVIDIA H200 NVL", "NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB", "H200", ""])
def test_an_unmapped_gpu_name_is_a_spec_error_naming_it(gpu_name: str) -> None:
    # Same SM count is no evidence: the class comes from the exact name, never from a proxy number.
    with pytest.raises(SpecError, match=re.escape(f"GPU {gpu_name!r} has no device class")):
        device_class_for_gpu_name(gpu_name)
