"""The ``tilecost`` command line's contract: bad input ends in one ``error:`` line naming the option and what it
allows, with status 2 and no traceback; simulated rows never reach the shipped dataset; ``train`` replaces no
shipped model unless told; ``python -m tilecost``, ``--version``, a closed pipe and the help texts."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.test_train_fixtures import HELDOUT_PROBLEMS, TRAIN_PROBLEMS, problem_rows, write_dataset
from tilecost.cli import main
from tilecost.collect.protocol import MeasureProtocol
from tilecost.collect.simulated import SIMULATED_GPU_NAME, SimulatedBackend
from tilecost.collect.store import DatasetStore
from tilecost.errors import DatasetError
from tilecost.problem import DType, Problem

REPO = Path(__file__).resolve().parent.parent
SIM = "tilecost.collect.simulated:simulated_backend"
# A simulated backend whose path does not say so: only the rows' gpu_name tells (the store's check).
DISGUISED = "tests.test_cli:disguised_backend"
TINY = ["--family", "random=1", "--sample-fraction", "0.02", "--min-sample", "4", "--rounds", "1"]


def disguised_backend(protocol: MeasureProtocol) -> SimulatedBackend:
    return SimulatedBackend(protocol)


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The stderr of a command argparse refuses (status 2), checked to hold no traceback."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert "Traceback" not in err
    return " ".join(err.split())  # argparse wraps its usage lines


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    """The single ``error:`` line of a command that ended with status 2."""
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


# ------------------------------------------------------------------ 1. simulated rows and the shipped dataset
@pytest.fixture
def fake_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose datasets/measurements stands in for the shipped dataset (so that a failing test
    cannot write into the real one); the working directory is elsewhere."""
    shipped = tmp_path / "repo" / "datasets" / "measurements"
    shipped.mkdir(parents=True)
    monkeypatch.setattr("tilecost.collect.store.shipped_dataset_dirs", lambda: frozenset({shipped.resolve()}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (elsewhere / "link").symlink_to(shipped.parent)
    return shipped


def test_the_repositorys_dataset_is_recognised_however_spelled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from tilecost.collect.store import is_shipped_dataset

    shipped = REPO / "datasets" / "measurements"
    (tmp_path / "link").symlink_to(REPO / "datasets")
    monkeypatch.chdir(tmp_path)  # not the repository: a cwd-relative comparison misses every spelling below

    for spelling in (shipped, f"{shipped}/", REPO / "datasets" / ".." / "datasets" / "measurements",
                     "link/measurements", os.path.relpath(shipped), f"file://{shipped}"):  # fmt: skip
        assert is_shipped_dataset(spelling), spelling
    for other in (tmp_path, tmp_path / "measurements", "s3://bucket/datasets/measurements"):
        assert not is_shipped_dataset(other), other


def test_the_store_refuses_simulated_rows_in_the_shipped_dataset_and_takes_real_ones(fake_repo: Path):
    problem = TRAIN_PROBLEMS[0]
    store = DatasetStore("link/measurements/")  # through a symlink, relative, with a trailing slash

    with pytest.raises(DatasetError, match="simulated backend may not write into the shipped dataset"):
        store.write_problem("h200", problem, "r1", problem_rows(problem, "train", gpu_name=SIMULATED_GPU_NAME))
    assert store.files() == []

    store.write_problem("h200", problem, "r1", problem_rows(problem, "train"))  # real rows: the dataset's own
    assert len(store.files()) == 1


@pytest.mark.parametrize("spelling", ["../repo/datasets/measurements/", "link/measurements"])
def test_collect_refuses_the_simulated_backend_in_the_shipped_dataset_from_any_directory(
    fake_repo: Path, capsys: pytest.CaptureFixture[str], spelling: str
):
    assert main(["collect", "--backend", SIM, "--dataset", spelling, *TINY]) == 2

    assert "may not write into the shipped dataset" in _one_error(capsys)
    assert list(fake_repo.iterdir()) == []


def test_the_store_refuses_simulated_rows_whatever_the_backend_is_called(
    fake_repo: Path, capsys: pytest.CaptureFixture[str]
):
    """The guarantee is where rows are written: a backend path without "simulated" in it passes the
    command's early check, and its rows (gpu_name SIMULATED ...) are still refused."""
    assert main(["collect", "--backend", DISGUISED, "--dataset", str(fake_repo), *TINY]) == 2

    assert "may not write into the shipped dataset" in _one_error(capsys)
    assert not list(fake_repo.rglob("*.parquet"))


def test_the_simulated_backend_still_writes_into_a_scratch_dataset(tmp_path: Path, capsys):
    dataset = tmp_path / "scratch"

    assert main(["collect", "--backend", SIM, "--dataset", str(dataset), *TINY]) == 0

    assert DatasetStore(dataset).files("h200")
    assert f"dataset {dataset}" in capsys.readouterr().out


# ------------------------------------------------------------------ 2. the backend, checked up front
def test_collect_refuses_the_cuda_backend_without_a_gpu_before_compiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, on any machine

    def no_sweep(*_: Any, **__: Any) -> None:
        raise AssertionError("started the sweep (its compile pool, its measuring process) without a GPU")

    monkeypatch.setattr("tilecost.collect.sweep.run_sweep", no_sweep)
    dataset = tmp_path / "ds"

    assert main(["collect", "--dataset", str(dataset), *TINY]) == 2

    line = _one_error(capsys)
    assert "tilecost.collect.backend:cuda_backend" in line and "CUDA" in line and SIM in line
    assert not dataset.exists()


@pytest.mark.parametrize(
    ("backend", "says"),
    [
        ("foo", "'foo' is not a backend path"),
        ("nonexist.module:fn", "module 'nonexist.module' does not import"),
        ("tilecost.collect.backend:nope", "has no function 'nope'"),
    ],
)
def test_a_backend_that_is_not_an_importable_module_function_is_refused(
    capsys: pytest.CaptureFixture[str], backend: str, says: str
):
    for command in ("collect", "nightly"):
        err = _refused([command, "--backend", backend], capsys)
        assert f"argument --backend: '{backend}'" in err and says in err and "use MODULE:FUNCTION" in err


def test_checking_the_simulated_backend_imports_no_torch():
    code = (
        "import sys; from tilecost.cli import _check_backend, build_parser; "
        f"args = build_parser().parse_args(['collect', '--backend', '{SIM}']); _check_backend(args.backend); "
        "print(sorted(m for m in ('torch', 'triton', 'pandas') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ------------------------------------------------------------------ 3. and 4. option values
@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["collect", "--gpus", "-1"], "argument --gpus: '-1' is not allowed; use a GPU count >= 1 or all"),
        (["collect", "--gpus", "abc"], "argument --gpus: 'abc' is not allowed; use a GPU count >= 1 or all"),
        (["collect", "--max-problems", "-1"], "argument --max-problems: -1 is not allowed; use an integer >= 1"),
        (["collect", "--shard", "abc"], "argument --shard: 'abc' is not a shard; use INDEX/COUNT"),
        (["collect", "--shard", "1"], "argument --shard: '1' is not a shard; use INDEX/COUNT"),
        (["collect", "--shard", "4/4"], "argument --shard: '4/4' is not a shard; use INDEX/COUNT"),
        (["collect", "--workers", "-3"], "argument --workers: -3 is not allowed; use an integer >= 1"),
        (["collect", "--time-budget-s", "-5"], "--time-budget-s: -5 is not allowed; use a number of seconds > 0"),
        (["collect", "--rounds", "0"], "argument --rounds: 0 is not allowed; use an integer >= 1"),
        (["collect", "--sample-fraction", "1.5"], "--sample-fraction: 1.5 is not allowed; use a fraction in (0, 1]"),
        (["collect", "--sample-fraction", "0"], "--sample-fraction: 0 is not allowed; use a fraction in (0, 1]"),
        (["collect", "--min-sample", "0"], "argument --min-sample: 0 is not allowed; use an integer >= 1"),
        (["collect", "--family", "random=x"], "argument --family: 'random=x': use NAME=COUNT with COUNT >= 0"),
        (["nightly", "--shard", "1"], "argument --shard: '1' is not a shard; use INDEX/COUNT"),
        (["nightly", "--gpus", "abc"], "argument --gpus: 'abc' is not allowed; use a GPU count >= 1 or all"),
        (["nightly", "--time-budget-s", "-5"], "argument --time-budget-s: -5 is not allowed"),
    ],
)  # fmt: skip
def test_option_values_are_refused_naming_the_option_and_what_it_allows(capsys, argv: list[str], says: str):
    assert says in _refused(argv, capsys)


@pytest.mark.parametrize(
    "argv",
    [
        ["space", "--dtype", "int8"],
        ["collect", "--dtypes", "int8"],
        ["collect", "--dtypes", "bf16,int8"],
        ["evaluate", "--dtypes", "int8"],
        ["train", "--dtypes", "int8"],
        ["nightly", "--dtypes", "int8"],
    ],
)
def test_an_unknown_dtype_is_refused_listing_the_dtypes(capsys, argv: list[str]):
    option = argv[1]
    assert f"argument {option}: 'int8' is not a dtype; use one of bf16, fp16, fp32, fp8e4m3" in _refused(argv, capsys)


def test_an_unknown_layout_is_refused_listing_the_layouts(capsys):
    assert "argument --layouts: 'tn' is not a layout; use one of nn, nt" in _refused(
        ["nightly", "--layouts", "tn"], capsys
    )


def test_collect_and_nightly_read_the_same_values_spaces_after_commas_included():
    from tilecost.cli import build_parser

    parser = build_parser()
    for command in ("collect", "nightly"):
        args = parser.parse_args([command, "--dtypes", "bf16, fp16", "--layouts", "nt, nn", "--shard", "1/4"])
        assert args.dtypes == [DType.BF16, DType.FP16] and [x.value for x in args.layouts] == ["nt", "nn"]
        assert args.shard == (1, 4)
        assert parser.parse_args([command, "--gpus", "all"]).gpus == 0  # every visible GPU
    assert parser.parse_args(["collect"]).dtypes == [DType.BF16]  # the defaults, parsed


def test_a_shard_from_the_environment_that_is_not_one_is_refused_naming_the_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
):
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "4")
    monkeypatch.setenv("TILECOST_SHARDS", "4")

    assert main(["collect", "--backend", SIM, "--dataset", str(tmp_path / "ds"), *TINY]) == 2

    assert "JOB_COMPLETION_INDEX/TILECOST_SHARDS" in _one_error(capsys)


# ------------------------------------------------------------------ 5. MLflow models that are not there
@pytest.fixture(scope="module")
def mlflow_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real sqlite MLflow store holding one registered model without versions or aliases."""
    mlflow = pytest.importorskip("mlflow")
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    mlflow.MlflowClient(uri).create_registered_model("tilecost-h200")
    return uri


@pytest.mark.parametrize("uri", ["models:/nope@champion", "models:/tilecost-h200@champion", "models:/tilecost-h200/3"])
def test_evaluate_and_report_refuse_a_model_the_store_does_not_hold_in_one_line(
    mlflow_store: str, tmp_path: Path, capsys, uri: str
):
    dataset = write_dataset(tmp_path / "ds")
    out = tmp_path / "report"
    commands = [
        ["evaluate", "--dataset", str(dataset), "--model-uri", uri, "--tracking-uri", mlflow_store],
        ["report", "--dataset", str(dataset), "--model-uri", uri, "--tracking-uri", mlflow_store, "--out", str(out)],
    ]
    for argv in commands:
        assert main(argv) == 2

        line = _one_error(capsys)
        assert f"--model-uri {uri}:" in line and "not found" in line
        assert "registered models: tilecost-h200 (aliases: none)" in line


def test_a_model_uri_in_a_store_that_does_not_exist_is_refused_without_creating_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
):
    pytest.importorskip("mlflow")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)

    assert main(["evaluate", "--model-uri", "models:/tilecost-h200@champion"]) == 2

    assert "the MLflow store sqlite:///mlflow.db does not exist" in _one_error(capsys)
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize("command", ["evaluate", "report"])
def test_an_artifact_and_a_model_uri_together_are_refused(capsys, command: str):
    err = _refused([command, "--model-uri", "models:/tilecost-h200@champion", "--artifact", "x"], capsys)
    assert "argument --artifact: not allowed with argument --model-uri" in err


# ------------------------------------------------------------------ 6. a reader that goes away
def test_a_closed_pipe_ends_the_command_quietly():
    """``tilecost space --list | head -1``: 6,012 keys, far more than a pipe holds, to a reader that leaves."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tilecost", "space", "--list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=60)

    assert first.startswith(b"ptr-") or first.startswith(b"tma-")
    assert code == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err


# ------------------------------------------------------------------ 7. train exports only when told where
@pytest.fixture
def fake_shipped_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped model's directory pointed at a scratch one (a failing test must not replace the real one),
    and the predictor's precomputation stubbed (an export takes minutes otherwise)."""
    shipped = tmp_path / "package" / "models"
    monkeypatch.setattr("tilecost.train.export.default_export_dir", lambda device_class: shipped / device_class)
    monkeypatch.setattr("tilecost.predict.prepare_artifact_files", lambda *_, **__: {})
    return shipped


TRAIN = ["--no-mlflow", "--param", "n_estimators=10", "--param", "max_depth=3", "--n-jobs", "1"]


def test_train_writes_no_artifact_unless_given_an_export_dir(fake_shipped_model: Path, tmp_path: Path, capsys):
    dataset = write_dataset(tmp_path / "ds")

    assert main(["train", "--dataset", str(dataset), "--device-class", "h200", *TRAIN]) == 0

    assert capsys.readouterr().out.strip().endswith("trained h200; no artifact exported")
    assert not fake_shipped_model.exists()

    artifact = tmp_path / "artifact"
    assert main(["train", "--dataset", str(dataset), "--export-dir", str(artifact), *TRAIN]) == 0
    assert (artifact / "metadata.json").is_file() and not fake_shipped_model.exists()


def _gated_dataset(tmp_path: Path) -> Path:
    """The tiny training dataset with its held-out problems fully timed, so that every answer has a measured
    fraction."""
    dataset = write_dataset(tmp_path / "ds", heldout=())
    store = DatasetStore(dataset)
    for problem in HELDOUT_PROBLEMS:
        store.write_problem("h200", problem, "rtest", problem_rows(problem, "heldout", keep=1.0))
    return dataset


def test_train_gate_swaps_in_only_an_artifact_that_answers_as_well(fake_shipped_model: Path, tmp_path: Path, capsys):
    """``--gate`` with the answer gate alone (``--no-promotion-rule``: a refit of the same model is level with it, so
    the promotion rule would refuse it first): the first export has nothing to be judged against; a second of the
    same model answers the same and is swapped in; one of a model that barely learned answers worse and is withheld,
    the artifact in DIR untouched."""
    dataset = _gated_dataset(tmp_path)
    artifact = tmp_path / "artifact"
    gated = ["train", "--dataset", str(dataset), "--export-dir", str(artifact), "--gate", "--no-promotion-rule"]

    assert main([*gated, *TRAIN]) == 0
    assert "answer gate had no artifact in" in capsys.readouterr().out
    first = (artifact / "metadata.json").read_bytes()

    assert main([*gated, *TRAIN]) == 0
    out = capsys.readouterr().out
    assert f"artifact {artifact} (promotion rule skipped: --no-promotion-rule; answer gate passed on 3 held-out" in out
    assert "ratio x1.0000" in out
    assert (artifact / "metadata.json").is_file() and not artifact.with_name(".artifact.new").exists()

    weak = ["--no-mlflow", "--param", "n_estimators=1", "--param", "max_depth=1", "--param", "learning_rate=0.01"]
    assert main([*gated, *weak, "--n-jobs", "1"]) == 3
    out = capsys.readouterr().out
    assert f"NOT swapped into {artifact}, which stays as it was: answer gate FAILED" in out, out
    withheld = artifact.with_name(".artifact.withheld")
    assert (withheld / "metadata.json").is_file()
    assert (artifact / "metadata.json").read_bytes() != (withheld / "metadata.json").read_bytes()
    assert not artifact.with_name(".artifact.new").exists()
    assert first != (withheld / "metadata.json").read_bytes()


def test_train_gate_puts_the_champion_alias_back_when_it_withholds(
    fake_shipped_model: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
):
    """A gated export the registry promoted but the gate refuses: the new version is tagged ``answer_gate`` and the
    champion alias goes back to the version before it, in a real MLflow sqlite store. The gate's verdict is the
    only injected part: a pass turned into a failure (the gate itself is tested above)."""
    import mlflow

    from tilecost.train import answer_gate
    from tilecost.train.answer_gate import AnswerGate

    dataset = write_dataset(tmp_path / "ds", heldout=())
    store = DatasetStore(dataset)
    more = [Problem(m, n, k) for m, n, k in ((700, 1500, 900), (48, 4096, 2048), (2000, 512, 1536), (1024, 2048, 640),
             (96, 3072, 1024), (1500, 1500, 1500), (256, 8192, 512), (4096, 256, 1024), (24, 1024, 1024),
             (600, 600, 2400), (3000, 1000, 300), (160, 2560, 2560))]  # fmt: skip
    for problem in [*HELDOUT_PROBLEMS, *more]:  # enough held-out problems for the registry to tell v2 from v1
        store.write_problem("h200", problem, "rtest", problem_rows(problem, "heldout", keep=1.0))
    artifact, uri = tmp_path / "artifact", f"sqlite:///{tmp_path / 'mlflow.db'}"
    common = ["train", "--dataset", str(dataset), "--export-dir", str(artifact), "--gate", "--tracking-uri", uri]
    weak = ["--param", "n_estimators=1", "--param", "max_depth=1", "--param", "learning_rate=0.01", "--n-jobs", "1"]
    assert main([*common, *weak]) == 0  # v1, the first champion, exported: nothing to judge against
    before = (artifact / "metadata.json").read_bytes()
    real = answer_gate.gate_artifacts

    def refused(*args: object) -> AnswerGate:
        verdict = real(*args)
        return AnswerGate(False, verdict.problems, verdict.challenger, verdict.champion, verdict.ratio,
                          verdict.interval, "refused for the test")  # fmt: skip

    monkeypatch.setattr(answer_gate, "gate_artifacts", refused)
    capsys.readouterr()

    assert main([*common, "--param", "n_estimators=80", "--param", "max_depth=6", "--n-jobs", "1"]) == 3
    out = capsys.readouterr().out
    assert "v2 (now champion" in out, out  # the registry promoted it
    assert f"promotion rule passed: beats the artifact in {artifact} (" in out, out  # and so does --gate's rule
    assert "registry: v2 tagged answer_gate, the champion alias back on v1" in out, out
    client = mlflow.MlflowClient(uri)
    assert str(client.get_model_version_by_alias("tilecost-h200", "champion").version) == "1"
    assert client.get_model_version("tilecost-h200", "2").tags["answer_gate"].startswith("answer gate FAILED")
    assert (artifact / "metadata.json").read_bytes() == before


def test_train_gate_leaves_nothing_staged_when_the_new_artifact_does_not_load(
    fake_shipped_model: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
):
    """A staged artifact that fails to load (its booster damaged after export, the only injected part; the load
    and its checksum refusal are real): one ``error:`` line, status 2, DIR byte for byte as it was, and no
    ``.DIR.new`` left behind. (``--no-promotion-rule``: the refit is level with DIR's model, so the promotion rule
    would withhold it before the answer gate loads it.)"""
    from tilecost.train import answer_gate

    dataset = _gated_dataset(tmp_path)
    artifact = tmp_path / "artifact"
    gated = ["train", "--dataset", str(dataset), "--export-dir", str(artifact), "--gate", "--no-promotion-rule", *TRAIN]
    assert main(gated) == 0
    before = {f.name: f.read_bytes() for f in artifact.iterdir()}
    real = answer_gate.gate_artifacts

    def damaged(challenger: Path, *args: object):
        model = Path(challenger) / "model.ubj"
        model.write_bytes(model.read_bytes()[: len(model.read_bytes()) // 2])
        return real(challenger, *args)

    monkeypatch.setattr(answer_gate, "gate_artifacts", damaged)
    capsys.readouterr()

    assert main(gated) == 2
    assert "model.ubj" in _one_error(capsys)
    assert {f.name: f.read_bytes() for f in artifact.iterdir()} == before
    assert not artifact.with_name(".artifact.new").exists()
    assert not artifact.with_name(".artifact.withheld").exists()


def test_train_gate_withholds_a_refit_that_does_not_beat_dirs_model_by_the_promotion_rule(
    fake_shipped_model: Path, tmp_path: Path, capsys
):
    """A refit of the same data with the same seed is level with the model in DIR (paired top-1 gain x1.0000, its
    interval holding 1): ``--gate`` refuses it by the promotion rule, as the nightly loop would, before the answer
    gate (which it would pass): status 3, DIR byte for byte as it was, the new artifact kept as ``.DIR.withheld``.
    With ``--no-promotion-rule`` the answer gate alone judges the same refit, and it is swapped in."""
    dataset = _gated_dataset(tmp_path)
    artifact = tmp_path / "artifact"
    gated = ["train", "--dataset", str(dataset), "--export-dir", str(artifact), "--gate", *TRAIN]
    assert main(gated) == 0
    before = {f.name: f.read_bytes() for f in artifact.iterdir()}
    capsys.readouterr()

    assert main(gated) == 3
    out = capsys.readouterr().out
    assert (f"NOT swapped into {artifact}, which stays as it was: promotion rule FAILED: does not beat the artifact "
            f"in {artifact} (") in out, out  # fmt: skip
    assert "<=" in out and "top-1 x1.0000, 90% paired x1.0000-x1.0000); the answer gate was not run" in out, out
    assert "answer gate FAILED" not in out and "answer gate passed" not in out
    assert {f.name: f.read_bytes() for f in artifact.iterdir()} == before
    withheld = artifact.with_name(".artifact.withheld")
    assert (withheld / "metadata.json").is_file() and (withheld / "model.ubj").read_bytes() == before["model.ubj"]
    assert not artifact.with_name(".artifact.new").exists()

    assert main([*gated, "--no-promotion-rule"]) == 0
    out = capsys.readouterr().out
    assert f"artifact {artifact} (promotion rule skipped: --no-promotion-rule; answer gate passed on 3" in out, out
    assert not artifact.with_name(".artifact.new").exists()


def test_train_gate_skips_the_promotion_rule_for_a_model_of_another_feature_schema(
    fake_shipped_model: Path, tmp_path: Path, capsys
):
    """A model in DIR trained on another feature schema cannot be scored on this one's features: the promotion rule
    is skipped, saying why, and the answer gate alone decides (it passes an artifact that no longer loads). The
    other schema is the only injected part: DIR's sidecar rewritten to name the next schema version."""
    import json

    from tilecost.features import FEATURE_SCHEMA_VERSION

    dataset = _gated_dataset(tmp_path)
    artifact = tmp_path / "artifact"
    gated = ["train", "--dataset", str(dataset), "--export-dir", str(artifact), "--gate", *TRAIN]
    assert main(gated) == 0
    sidecar = artifact / "metadata.json"
    metadata = json.loads(sidecar.read_text())
    metadata["feature_schema_version"] = FEATURE_SCHEMA_VERSION + 1
    sidecar.write_text(json.dumps(metadata))
    capsys.readouterr()

    assert main(gated) == 0
    out = capsys.readouterr().out
    assert f"artifact {artifact} (promotion rule skipped: the artifact in {artifact} cannot be scored (" in out, out
    assert f"trained on feature schema {FEATURE_SCHEMA_VERSION + 1}" in out, out
    assert json.loads(sidecar.read_text())["feature_schema_version"] == FEATURE_SCHEMA_VERSION  # swapped in


def test_train_gate_without_held_out_problems_leaves_the_answer_gate_to_decide(
    fake_shipped_model: Path, tmp_path: Path, capsys
):
    """No held-out problems, so no evaluation to apply the promotion rule to: ``--gate`` says so and the answer gate
    decides, as before the rule (it passes, having no problem to judge by)."""
    dataset = write_dataset(tmp_path / "ds", heldout=())
    artifact = tmp_path / "artifact"
    gated = ["train", "--dataset", str(dataset), "--export-dir", str(artifact), "--gate", *TRAIN]
    assert main(gated) == 0
    capsys.readouterr()

    assert main(gated) == 0
    out = capsys.readouterr().out
    assert f"artifact {artifact} (promotion rule skipped: no held-out problems to score the two models on; " in out
    assert "answer gate passed: no held-out problem both artifacts answer" in out, out


def test_train_gate_needs_an_export_dir(capsys):
    assert main(["train", "--gate", "--no-mlflow"]) == 2
    assert "--gate needs --export-dir DIR" in capsys.readouterr().err
    assert main(["train", "--export-dir", "x", "--no-promotion-rule", "--no-mlflow"]) == 2
    assert "--no-promotion-rule goes with --gate" in capsys.readouterr().err


def test_train_keeps_no_export_and_refuses_it_with_an_export_dir(capsys):
    from tilecost.cli import build_parser

    assert build_parser().parse_args(["train", "--no-export"]).export_dir is None  # scripts/main.sh's call
    err = _refused(["train", "--export-dir", "x", "--no-export"], capsys)
    assert "argument --no-export: not allowed with argument --export-dir" in err


# ------------------------------------------------------------------ 8. python -m tilecost, --version
def test_python_m_tilecost_runs_the_cli_and_prints_the_version():
    from importlib import metadata

    done = subprocess.run([sys.executable, "-m", "tilecost", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"tilecost {metadata.version('tilecost')}"


def test_the_version_falls_back_to_the_source_trees_pyproject(monkeypatch: pytest.MonkeyPatch):
    from importlib import metadata

    from tilecost.cli import package_version

    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    expected = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert package_version() == expected


# ------------------------------------------------------------------ 9. help shows what the defaults are
@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("space", ["--device DEVICE device class", "(default h200)", "(default bf16)", "(default nt)"]),
        ("collect", ["(default tilecost.collect.backend:cuda_backend: the CUDA GPU",
                     "(default datasets/measurements: the shipped dataset", "(default 3)", "(default 0.35)"]),
        ("nightly", ["(default 16)", "(default 5;", "(default 3600)", "(default tilecost.collect.backend:cuda_backend",
                     "(default datasets/measurements: the shipped dataset", "default random=4 layers=2"]),
        ("train", ["write no predictor artifact (the default", "the nightly loop always applies the rule"]),
    ],
)  # fmt: skip
def test_help_describes_the_options_with_their_defaults(capsys, command: str, shown: list[str]):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for part in shown:
        assert part in text


# ------------------------------------------------------------------ 10. nightly: a missing query log, the plan
def test_nightly_warns_of_a_query_log_that_does_not_exist_and_goes_on(tmp_path: Path, capsys):
    missing = tmp_path / "nonexistent" / "q.jsonl"
    argv = ["nightly", "--backend", SIM, "--dataset", str(tmp_path / "measurements"), "--state-dir",
            str(tmp_path / "state"), "--night", "2026-11-29", "--steps", "plan", "--family", "random=1",
            "--no-env-shard", "--query-log", str(missing)]  # fmt: skip

    assert main(argv) == 0

    err = capsys.readouterr().err
    assert f"warning: the query log {missing} (--query-log) does not exist" in err


def test_the_nightly_reports_plan_says_what_model_top_did(tmp_path: Path):
    from tilecost.train.nightly import NightlySettings
    from tilecost.train.nightly_report import nightly_markdown
    from tilecost.train.nightly_state import NightDir

    argv = ["nightly", "--backend", SIM, "--dataset", str(tmp_path / "measurements"), "--state-dir",
            str(tmp_path / "state"), "--night", "2026-11-29", "--steps", "plan", "--family", "random=1",
            "--no-env-shard"]  # fmt: skip
    assert main(argv) == 0
    settings = NightlySettings(backend=SIM, dataset=str(tmp_path / "measurements"), state_dir=str(tmp_path / "state"),
                               night="2026-11-29")  # fmt: skip

    report = nightly_markdown(settings, NightDir(tmp_path / "state", "2026-11-29"), [])

    assert "no training problems re-timed on the model's favourites (--model-top 0)" in report


def test_the_plan_line_says_what_model_top_did():
    from tilecost.train.nightly_plan import plan_line

    counts = {"flagged": 0, "flagged_logged": 0, "flagged_measured": 0, "flagged_too_large": 0,
              "flagged_over_limit": 0, "fresh": 4, "model_top": 0, "heldout": 1, "train": 3}  # fmt: skip

    off = plan_line(counts, "no query log configured", 0, 64, "plan.json")
    assert "model's top 64" not in off and "no training problems re-timed on the model's favourites" in off
    assert off.startswith("plan: 4 problems (") and off.endswith("1 held out) -> plan.json")

    on = plan_line({**counts, "model_top": 2, "train": 5}, "q.jsonl", 3, 16, "plan.json")
    assert "2 of 3 training problems re-timed on up to 16 of the model's fastest untimed configurations" in on
    assert on.startswith("plan: 6 problems (")
