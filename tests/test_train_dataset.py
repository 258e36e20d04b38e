"""Reading training data: filters, digests, status counts and clear errors for bad data (real Parquet)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.test_train_fixtures import HELDOUT_PROBLEMS, RUN_ID, TRAIN_PROBLEMS, problem_rows, write_dataset
from tilecost.collect.store import DatasetStore
from tilecost.errors import DatasetError
from tilecost.problem import Problem
from tilecost.train.dataset import load_measurements
from tilecost.train.pipeline import candidate_rows, split_by_role

SHIPPED = Path(__file__).resolve().parent.parent / "datasets" / "measurements"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("train") / "ds")


def test_reads_timed_rows_and_counts_statuses(dataset: Path) -> None:
    m = load_measurements(dataset, "h200")

    assert m.rows_read == m.rows_timed == len(m.frame)
    assert set(m.status_counts) <= {"ok", "hopeless"} and sum(m.status_counts.values()) == m.rows_read
    assert len(m.problem_keys("train")) == len(TRAIN_PROBLEMS)
    assert len(m.problem_keys("heldout")) == len(HELDOUT_PROBLEMS)
    assert m.fingerprint()["gpu_name"] == "NVIDIA H200" and m.fingerprint()["sm_count"] == 132
    assert "ok" in m.summary()


def test_digest_covers_exactly_the_files_read_and_their_bytes(dataset: Path, tmp_path: Path) -> None:
    everything = load_measurements(dataset, "h200")
    again = load_measurements(dataset, "h200")
    only_nt = load_measurements(dataset, "h200", layouts=["nt"])
    assert everything.digest == again.digest == only_nt.digest  # every file is nt

    other = write_dataset(tmp_path / "other", train=TRAIN_PROBLEMS[:-1])
    assert load_measurements(other, "h200").digest != everything.digest
    assert len(load_measurements(other, "h200").files) == len(everything.files) - 1


def test_failed_rows_are_counted_not_candidates(tmp_path: Path) -> None:
    store = DatasetStore(tmp_path)
    problem = Problem(256, 512, 1024)
    rows = problem_rows(problem, "train")
    for row in rows[:3]:
        row.update(status="compile_error", time_us=None, error="ptxas: out of registers")
    store.write_problem("h200", problem, RUN_ID, rows)

    m = load_measurements(tmp_path, "h200")

    assert m.status_counts["compile_error"] == 3
    assert m.rows_timed == len(rows) - 3


def test_mostly_failed_data_warns_and_all_failed_data_is_refused(tmp_path: Path) -> None:
    store = DatasetStore(tmp_path)
    problem = Problem(256, 512, 1024)
    rows = problem_rows(problem, "train")
    for row in rows[1:]:
        row.update(status="out_of_resources", time_us=None)
    store.write_problem("h200", problem, RUN_ID, rows)
    with pytest.warns(UserWarning, match="failed"):
        load_measurements(tmp_path, "h200")

    rows[0].update(status="crashed", time_us=None)
    store.write_problem("h200", problem, RUN_ID, rows)
    with pytest.raises(DatasetError, match="all .* rows failed"):
        load_measurements(tmp_path, "h200")


def test_device_class_without_rows_names_what_exists(dataset: Path) -> None:
    with pytest.raises(DatasetError, match=r"'h100_sxm'.*\['h200'\]"):
        load_measurements(dataset, "h100_sxm")
    with pytest.raises(DatasetError, match="match"):
        load_measurements(dataset, "h200", dtypes=["fp16"])


def test_wrong_schema_version_is_refused(tmp_path: Path) -> None:
    store = DatasetStore(tmp_path)
    problem = Problem(256, 512, 1024)
    path = store.write_problem("h200", problem, RUN_ID, problem_rows(problem, "train"))
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({b"tilecost.schema_version": b"99"}), path)

    with pytest.raises(DatasetError, match="schema version 99"):
        load_measurements(tmp_path, "h200")


def test_missing_column_is_named(tmp_path: Path) -> None:
    store = DatasetStore(tmp_path)
    problem = Problem(256, 512, 1024)
    path = store.write_problem("h200", problem, RUN_ID, problem_rows(problem, "train"))
    table = pq.read_table(path)
    slim = table.drop_columns(["num_stages"])
    pq.write_table(slim.replace_schema_metadata(table.schema.metadata), path)

    with pytest.raises(DatasetError, match=r"missing column\(s\) \['num_stages'\]"):
        load_measurements(tmp_path, "h200")


def test_timed_rows_without_a_time_are_refused(tmp_path: Path) -> None:
    store = DatasetStore(tmp_path)
    problem = Problem(256, 512, 1024)
    rows = problem_rows(problem, "train")
    rows[0]["time_us"] = None
    store.write_problem("h200", problem, RUN_ID, rows)

    with pytest.raises(DatasetError, match="positive finite time_us"):
        load_measurements(tmp_path, "h200")


def test_rows_of_two_triton_versions_need_a_choice(tmp_path: Path) -> None:
    store = DatasetStore(tmp_path)
    a, b = Problem(256, 512, 1024), Problem(1024, 1024, 512)
    store.write_problem("h200", a, RUN_ID, problem_rows(a, "train"))
    store.write_problem("h200", b, RUN_ID, problem_rows(b, "train", triton_version="3.7.0"))

    with pytest.raises(DatasetError, match="Triton versions"):
        load_measurements(tmp_path, "h200")
    assert load_measurements(tmp_path, "h200", triton_version="3.7.0").problem_keys() == [b.key]


def test_split_never_puts_a_problem_on_both_sides(dataset: Path, tmp_path: Path) -> None:
    train, heldout = split_by_role(load_measurements(dataset, "h200"))
    assert not set(train["problem_key"]) & set(heldout["problem_key"])

    store = DatasetStore(tmp_path)
    problem = Problem(256, 512, 1024)
    store.write_problem("h200", problem, RUN_ID, problem_rows(problem, "train"))
    store.write_problem("h200", problem, "rsecond", problem_rows(problem, "heldout"))
    with pytest.raises(DatasetError, match="both roles"):
        split_by_role(load_measurements(tmp_path, "h200"))


def test_repeated_measurements_collapse_to_their_median(tmp_path: Path) -> None:
    store = DatasetStore(tmp_path)
    problem = Problem(256, 512, 1024)
    rows = problem_rows(problem, "heldout")
    store.write_problem("h200", problem, RUN_ID, rows)
    store.write_problem("h200", problem, "rsecond", [dict(r, time_us=r["time_us"] * 3) for r in rows])
    store.write_problem("h200", problem, "rthird", [dict(r, time_us=r["time_us"] * 2) for r in rows])

    unique = candidate_rows(load_measurements(tmp_path, "h200").frame)

    assert len(unique) == len(rows)
    first = rows[0]
    assert unique.set_index("config_id").loc[first["config_id"], "time_us"] == pytest.approx(2 * first["time_us"])


@pytest.mark.skipif(not SHIPPED.is_dir(), reason="the shipped dataset is not in this checkout")
def test_reads_real_files_of_the_shipped_dataset(tmp_path: Path) -> None:
    # Three real files copied into a scratch root keep the test fast and independent of new data.
    source = sorted((SHIPPED / "device_class=h200" / "dtype=bf16" / "layout=nt").glob("*.parquet"))[:3]
    target = tmp_path / "device_class=h200" / "dtype=bf16" / "layout=nt"
    target.mkdir(parents=True)
    for path in source:
        (target / path.name).write_bytes(path.read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the shipped data has no failed majority
        m = load_measurements(tmp_path, "h200", dtypes=["bf16"], layouts=["nt"])

    assert len(m.files) == 3
    assert m.rows_timed == sum(pq.read_metadata(p).num_rows for p in source) - sum(
        v for k, v in m.status_counts.items() if k not in ("ok", "hopeless")
    )
    assert m.fingerprint()["triton_version"] == "3.6.0"
    assert isinstance(pa.__version__, str)


def test_a_problem_measured_again_is_read_from_its_newest_run_only(tmp_path):
    import datetime as dt

    from tilecost.train.dataset import load_measurements

    root = write_dataset(tmp_path / "ds")
    again = HELDOUT_PROBLEMS[0]
    before = load_measurements(root, "h200")
    old_rows = before.frame[before.frame.problem_key == again.key]
    newer = problem_rows(again, "heldout", run_id="rnewer", timestamp=dt.datetime(2026, 12, 1, tzinfo=dt.UTC))
    for row in newer:
        row["time_us"] *= 2.0  # tell the runs apart
    DatasetStore(root).write_problem("h200", again, "rnewer", newer)

    after = load_measurements(root, "h200")
    rows = after.frame[after.frame.problem_key == again.key]
    assert set(rows.run_id) == {"rnewer"}
    assert len(rows) == len(old_rows)
    assert after.superseded_rows == len(old_rows)
    assert "superseded by a newer run" in after.summary()
    untouched = after.frame[after.frame.problem_key == TRAIN_PROBLEMS[0].key]
    assert len(untouched) == len(before.frame[before.frame.problem_key == TRAIN_PROBLEMS[0].key])


def test_a_later_run_over_a_few_configs_adds_to_the_earlier_rows_and_supersedes_only_those(tmp_path):
    import datetime as dt

    from tilecost.train.dataset import load_measurements

    root = write_dataset(tmp_path / "ds")
    problem = TRAIN_PROBLEMS[0]
    before = load_measurements(root, "h200").frame
    old = before[before.problem_key == problem.key]
    retimed = problem_rows(problem, "train", run_id="rtop", timestamp=dt.datetime(2026, 12, 1, tzinfo=dt.UTC))[:2]
    for row in retimed:
        row["time_us"] *= 2.0
    DatasetStore(root).write_problem("h200", problem, "rtop", retimed)

    after = load_measurements(root, "h200")
    rows = after.frame[after.frame.problem_key == problem.key].set_index("config_id")
    again = [r["config_id"] for r in retimed]
    assert len(rows) == len(old)  # nothing lost, nothing counted twice
    assert set(rows.loc[again, "run_id"]) == {"rtop"}
    assert set(rows.drop(index=again).run_id) == set(old.run_id)
    assert after.superseded_rows == 2
