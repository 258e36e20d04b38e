"""``tilecost predict M N K``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilecost.cli import main

from . import test_predict_fixture as fixtures

artifact = fixtures.artifact  # the session fixture, shared by the predictor's test modules


def test_lists_the_top_configurations(artifact: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predict", "1000", "1000", "8000", "--artifact", str(artifact), "--top", "3"]) == 0

    out, err = capsys.readouterr()
    rows = out.strip().splitlines()
    assert len(rows) == 3 and rows[0].split()[0] == "1" and rows[0].split()[-1] == "model"
    assert err.startswith("1000x1000x8000-bf16-nt: 3 configuration(s) from ")


def test_a_measured_first_row_is_said_to_lead_the_model_rows(
    artifact: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A measured best leads the model's predictions even when they predict less time: the listing says so."""
    from tilecost.predict.predictor import Predictor

    problem = next(iter(Predictor.load(artifact).measured))  # a training problem, answered from measurements
    extents, dtype, layout = problem.split("-")
    m, n, k = extents.split("x")

    assert (
        main(["predict", m, n, k, "--dtype", dtype, "--layout", layout, "--artifact", str(artifact), "--top", "3"]) == 0
    )

    out, err = capsys.readouterr()
    rows = out.strip().splitlines()
    sources = [row.split()[4] for row in rows]  # place, config, time, "us", source
    assert sources == ["measured", "model", "model"]
    assert rows[0].endswith(" timed)") and "(best of " in rows[0]  # what the measured best is the best of
    assert "the first row was measured on the device and leads" in err

    assert main(["predict", "1000", "1000", "8000", "--artifact", str(artifact), "--top", "3"]) == 0
    assert "measured on the device" not in capsys.readouterr().err


def test_answers_for_another_device_are_flagged_and_say_where_a_measured_best_was_measured(
    artifact: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--for h100_sxm``: the artifact's measured best still leads (as the artifact device's measurement, with what
    it is the best of), every answer is flagged device_mismatch, and the note names the device that measured it."""
    from tilecost.predict.predictor import Predictor

    problem = next(iter(Predictor.load(artifact).measured))
    extents, dtype, layout = problem.split("-")
    argv = ["predict", *extents.split("x"), "--dtype", dtype, "--layout", layout, "--artifact", str(artifact)]

    assert main([*argv, "--top", "3", "--for", "h100_sxm"]) == 0
    out, err = capsys.readouterr()
    rows = out.strip().splitlines()
    assert [row.split()[4] for row in rows] == ["measured_on_artifact_device", "model", "model"]
    assert rows[0].endswith(" timed)") and "(best of " in rows[0]
    assert "for h100_sxm; OUT OF DISTRIBUTION: device_mismatch" in err
    assert "the first row was measured on the model's device (h200) and leads" in err

    assert main([*argv, "--for", "h100_sxm", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (row,) = data["ranking"]
    assert row["source"] == "measured_on_artifact_device" and row["configs_measured"] >= 1
    assert data["ood"]["flagged"] and data["ood"]["reasons"] == ["device_mismatch"]


def test_a_known_device_without_a_model_is_pointed_at_for(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predict", "8", "8", "8", "--device", "h100_sxm"]) == 2
    err = capsys.readouterr().err
    assert "--device 'h100_sxm' has no shipped model" in err
    assert "or --device h200 --for h100_sxm: the h200 artifact's answers for it, flagged device_mismatch where" in err
    # What the message names works.
    assert main(["predict", "8", "8", "8", "--device", "h200", "--for", "h100_sxm"]) == 0
    assert "OUT OF DISTRIBUTION: device_mismatch" in capsys.readouterr().err
    assert main(["predict", "8", "8", "8", "--device", "b200"]) == 2
    assert "--for" not in capsys.readouterr().err  # not a known device class: nothing to suggest


def test_json_output_carries_the_verdict(artifact: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predict", "1", "4096", "262144", "--artifact", str(artifact), "--json"]) == 0

    data = json.loads(capsys.readouterr().out)
    assert data["problem"] == "1x4096x262144-bf16-nt"
    assert data["ood"]["flagged"] and "dim_outside_training_range" in data["ood"]["reasons"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["0", "8", "8"], "m=0 is out of range"),
        (["8", "8", "8", "--dtype", "int8"], "dtype='int8' is not allowed"),
        (["8", "8", "8", "--device", "b200"], "--device 'b200' has no shipped model; use one of ['h200']"),
        (["8", "8", "8", "--for", "b200"], "device='b200' is not a known device class; use one of ['h100_sxm', "),
    ],
)
def test_bad_input_exits_2_with_the_message(
    artifact: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    extra = [] if "--device" in argv else ["--artifact", str(artifact)]

    assert main(["predict", *argv, *extra]) == 2
    assert message in capsys.readouterr().err


def test_json_output_is_strict_json_for_a_dtype_never_trained_on(
    artifact: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["predict", "64", "64", "64", "--dtype", "fp8e4m3", "--artifact", str(artifact), "--json"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out, parse_constant=lambda name: pytest.fail(f"non-JSON constant {name}"))
    assert data["ood"]["flagged"] and "unseen_dtype" in data["ood"]["reasons"]
    assert data["ood"]["neighbour_distance_log2"] is None


def test_bad_input_to_any_subcommand_is_one_error_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["collect", "--plan", str(tmp_path / "missing.json"), "--dataset", str(tmp_path / "ds")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: plan file") and "missing.json" in err and "Traceback" not in err
    assert not (tmp_path / "ds").exists()
