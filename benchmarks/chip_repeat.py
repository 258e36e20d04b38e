"""How far one H200's best configuration holds on another H200 (eleventh session; BENCHMARKS §3c).

    .venv/bin/python benchmarks/chip_repeat.py        (seconds; reads datasets/measurements and datasets/repeats)

The 12 held-out bf16 nt problems of ``datasets/plans/2026-11-30-chip-repeat-bf16-nt.json`` were measured again,
over every candidate, by three runs of 2026-11-30 (``datasets/repeats``): ``r11chipg1`` on GPU 1 of a two-H200
host (call 1), ``r11chipg1b`` on the same GPU minutes later (call 2; its budget ran out before the 12th
problem), ``r11chipg0`` on GPU 0 of the machine lent for call 3 (a fresh loan: another chip, whichever host).
Their labels in the dataset come from earlier sessions' runs (other loans, chips not recorded). For each pair
of runs of a problem, over the configurations both timed ``ok``, one run's best configuration judged by the
other run's times (:func:`label_stability.pairs`), grouped by what the two runs share.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as ds

sys.path.insert(0, str(Path(__file__).resolve().parent))
from label_stability import pairs  # noqa: E402

SAME_CHIP = {"r11chipg1", "r11chipg1b"}
OTHER_CHIP = "r11chipg0"
NEW = SAME_CHIP | {OTHER_CHIP}


def kind(old: str, new: str) -> str:
    runs = {old, new}
    if runs <= SAME_CHIP:
        return "same GPU, minutes apart"
    if runs <= NEW:
        return "two GPUs, 15 minutes apart"
    if runs & NEW:
        return "an earlier session's run"
    return "two earlier runs"


def main() -> int:
    repo = Path(__file__).resolve().parents[1]
    columns = ["run_id", "problem_key", "config_id", "status", "time_us", "timestamp"]
    repeats = ds.dataset(repo / "datasets/repeats", partitioning="hive").to_table(columns=columns).to_pandas()
    keys = set(repeats["problem_key"])
    measured = (
        ds.dataset(repo / "datasets/measurements", partitioning="hive")
        .to_table(columns=columns, filter=ds.field("problem_key").isin(sorted(keys)))
        .to_pandas()
    )
    frame = pd.concat([measured, repeats])
    frame = frame[frame["status"] == "ok"]
    result = pairs(frame)
    result["kind"] = [kind(o, n) for o, n in zip(result["old_run"], result["new_run"], strict=True)]
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(result.sort_values(["kind", "problem"]).to_string(index=False, float_format="%.4f"))
    print()
    for name, group in result.groupby("kind", sort=False):
        both = np.concatenate([group["old_best_in_new"], group["new_best_in_old"]])
        mean, spearman = np.exp(np.log(both).mean()), group["spearman"].median()
        print(f"{name:<28} {len(group):>3} run pairs, {group['problem'].nunique():>2} problems: one run's best in the "
              f"other, geometric mean {mean:.4f}, worst {both.min():.3f}, share >= 0.98 {np.mean(both >= 0.98):.2f}; "
              f"Spearman median {spearman:.4f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
