"""Commands of tilecost.train for the ``tilecost`` CLI (registered by tilecost.cli).

    tilecost train    --device-class h200 [--export-dir DIR [--gate [--no-promotion-rule]]]  fit, evaluate on
                      held-out shapes, log to MLflow, export (with --gate: swapped into DIR only when the new model
                      beats DIR's by the promotion rule and its answers then pass the answer gate against DIR's)
    tilecost evaluate --device-class h200 [--artifact DIR | --model-uri models:/tilecost-h200@champion]
    tilecost refresh-measured --device-class h200 [--artifact DIR] [--out DIR] [--for DEVICE | --all]  the tuning
                      database

Both print the held-out evaluation table. ``train`` writes a predictor artifact only into the
``--export-dir`` it is given: the shipped model (``tilecost/models/<class>``) is replaced only by
naming it. ``--gate`` applies the nightly loop's two checks in its order: the promotion rule
(:func:`.tracking.beats`, with DIR's model scored on the same held-out problems; skipped, and the reason printed,
when DIR's model cannot be scored) and then the answer gate (:mod:`.answer_gate`). ``--no-promotion-rule`` leaves
the answer gate alone to decide. Heavy libraries (xgboost, mlflow, pandas) are imported inside the command
functions only, so ``tilecost --help`` stays fast.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tilecost.cli import dtypes_arg, layouts_arg
from tilecost.collect.store import SHIPPED_DATASET

__all__ = ["register", "add_model_source", "registered_model_errors"]


def _param(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` with VALUE a Python literal (``max_depth=10``, ``target='log_time_us'``) or a bare word."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--param {text!r}: use NAME=VALUE, e.g. max_depth=10")
    try:
        return name.strip(), ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        return name.strip(), value.strip()


def _add_data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", default=str(SHIPPED_DATASET),
                   help="dataset root, a path or pyarrow URI (default %(default)s: the shipped dataset)")  # fmt: skip
    p.add_argument("--device-class", default="h200", help="device class to read (default %(default)s)")
    p.add_argument("--dtypes", type=dtypes_arg, default=None, help="e.g. bf16,fp16 (default: all)")
    p.add_argument("--layouts", type=layouts_arg, default=None, help="e.g. nt,nn (default: all)")
    p.add_argument("--triton-version", default=None, help="only rows measured with this Triton version")


def add_model_source(p: argparse.ArgumentParser) -> None:
    """The model a command reads: ``--artifact`` or ``--model-uri`` (not both), and ``--tracking-uri`` for the
    latter; load it within :func:`registered_model_errors`."""
    model = p.add_mutually_exclusive_group()
    model.add_argument("--artifact", default=None, help="artifact directory (default: the shipped model of the class)")
    model.add_argument("--model-uri", default=None,
                       help="an MLflow registered model instead, e.g. models:/tilecost-h200@champion")  # fmt: skip
    p.add_argument("--tracking-uri", default=None, help="MLflow tracking URI (store) for --model-uri")


@contextlib.contextmanager
def registered_model_errors(model_uri: str | None, tracking_uri: str | None) -> Iterator[None]:
    """Around loading ``model_uri`` (nothing when None): a store that does not exist, or MLflow's exception
    for a model or alias its store does not hold, becomes a ``ValueError`` naming the URI, the store and the
    models registered there (one ``error:`` line from the CLI, not MLflow's traceback)."""
    if model_uri is None:
        yield
        return
    from mlflow.exceptions import MlflowException

    from .tracking import tracking_uri as resolve_uri

    store = resolve_uri(tracking_uri)
    database = store.removeprefix("sqlite:///")
    if store.startswith("sqlite:///") and database != ":memory:" and not Path(database).is_file():
        # MLflow would create an empty store there and then not find the model in it
        raise ValueError(
            f"--model-uri {model_uri}: the MLflow store {store} does not exist; name one with --tracking-uri "
            "(or $MLFLOW_TRACKING_URI)"
        )
    try:
        yield
    except MlflowException as exc:
        reason = (str(exc).strip().splitlines() or ["not found"])[0]
        raise ValueError(
            f"--model-uri {model_uri}: {reason} (MLflow store {store}; registered models: {_registered(store)})"
        ) from exc


def _registered(store: str) -> str:
    """The store's registered models with their aliases, for an error message."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        models = MlflowClient(store).search_registered_models()
    except MlflowException as exc:
        return f"not listed ({exc})"
    names = [f"{m.name} (aliases: {', '.join(sorted(m.aliases)) or 'none'})" for m in models]
    return "; ".join(sorted(names)) or "none"


def _cmd_train(args: argparse.Namespace) -> int:
    from tilecost.predict.artifact import METADATA_FILE

    from .pipeline import train_device_class
    from .progress import Heartbeat
    from .tracking import champion_version, describe, experiment_name, tracking_uri

    export_dir = Path(args.export_dir) if args.export_dir else None  # never the shipped model by default
    if args.gate and export_dir is None:
        raise ValueError("--gate needs --export-dir DIR: it judges the new artifact against the one in DIR")
    if args.no_promotion_rule and not args.gate:
        raise ValueError("--no-promotion-rule goes with --gate: without it nothing is judged")
    target, staged = export_dir, None
    if args.gate and export_dir is not None and (export_dir / METADATA_FILE).is_file():
        staged = export_dir = _fresh(export_dir.with_name(f".{export_dir.name}.new"))  # beside DIR, judged, swapped
    uri = None if args.no_mlflow else tracking_uri(args.tracking_uri)
    # The registry's champion before this run: a gated export that is withheld puts the alias back on it.
    previous = champion_version(uri, experiment_name(args.device_class)) if uri and staged is not None else None
    params = dict(args.param or [])
    params.setdefault("seed", args.seed)
    if args.n_jobs is not None:
        params["n_jobs"] = args.n_jobs
    label = "training and export" if export_dir is not None else "training"
    try:
        with Heartbeat(label, sys.stderr):  # a line every 15 s while the fit (and export) runs
            result = train_device_class(
                args.dataset,
                args.device_class,
                dtypes=args.dtypes,
                layouts=args.layouts,
                triton_version=args.triton_version,
                model_params=params,
                cv_folds=args.cv_folds,
                export_dir=export_dir,
                tracking_uri=uri,
                log=lambda line: print(line, file=sys.stderr),
            )
        print(result.report())
        if result.run is not None:
            print(describe(result.run))
        print(result.timing())
        if staged is not None and target is not None:
            return _gate_and_swap(
                result, staged, target, args.device_class, previous, promotion_rule=not args.no_promotion_rule
            )
    finally:
        # Swapped in or kept as .DIR.withheld, the staging is gone; what is left is a failed export or a
        # challenger that did not load, with DIR untouched: nothing to keep. (Where DIR itself is missing, a swap
        # failed half way, so the staged artifact is the one left and stays.)
        if staged is not None and staged.exists() and target is not None and (target / METADATA_FILE).is_file():
            _fresh(staged)
    where = f"artifact {result.artifact_dir}" if result.artifact_dir else "no artifact exported"
    if args.gate and target is not None:
        where += f" (the promotion rule and the answer gate had no artifact in {target} to judge it against)"
    print(f"trained {args.device_class}; {where}")
    return 0


def _fresh(directory: Path) -> Path:
    """``directory``, removed first if a previous run left it."""
    import shutil

    if directory.exists():
        shutil.rmtree(directory)
    return directory


def _gate_and_swap(
    result: Any, staging: Path, target: Path, device_class: str, previous: str | None, *, promotion_rule: bool = True
) -> int:
    """The nightly loop's two checks on the artifact staged in ``staging`` against ``target``'s, over the training
    run's held-out problems: the promotion rule (:func:`_promotion_rule`; not with ``promotion_rule=False``), then
    the answer gate (:mod:`.answer_gate`). Swapped in when both pass (exit status 0); otherwise ``target`` stays as
    it was and the new artifact is kept beside it as ``.<name>.withheld`` for a look (exit status 3), and where the
    run's model was promoted in the MLflow registry the champion alias goes back to ``previous`` (the nightly
    loop's rule)."""
    from tilecost.predict.artifact import swap_in

    from .answer_gate import gate_artifacts
    from .pipeline import split_by_role

    _, heldout = split_by_role(result.measurements)
    if promotion_rule:
        promoted, promotion = _promotion_rule(result, heldout, target, device_class)
    else:
        promoted, promotion = None, "promotion rule skipped: --no-promotion-rule"
    if promoted is False:
        why = f"{promotion}; the answer gate was not run"
        return _withhold(result, staging, target, device_class, previous, why, check="promotion_rule")
    gate = gate_artifacts(staging, target, heldout)
    if gate is None or gate.passed:
        swap_in(staging, target)
        verdict = gate.describe() if gate is not None else "answer gate: no artifact to judge against"
        print(f"trained {device_class}; artifact {target} ({promotion}; {verdict})")
        return 0
    return _withhold(result, staging, target, device_class, previous, f"{gate.describe()}; {promotion}")


def _promotion_rule(result: Any, heldout: Any, target: Path, device_class: str) -> tuple[bool | None, str]:
    """The registry's promotion rule (:func:`.tracking.beats`) with the model of ``target``'s artifact as the
    champion, scored on the same held-out problems (``heldout``) as the new one (``result.evaluation``): whether the
    new model beats it, and the verdict in the registry's words and figures. None where the rule cannot judge: no
    held-out problems, or an artifact that cannot be scored here (another feature schema or feature list, another
    device class, a file that does not load: the answer gate alone decides, as the registry replaces a champion it
    cannot score) or one trained on some of the held-out problems (its score would flatter it)."""
    from tilecost.device import load_device
    from tilecost.errors import TilecostError

    from .loading import heldout_trained_on, load_artifact_model
    from .pipeline import evaluate_model
    from .tracking import judge

    if result.evaluation is None:
        return None, "promotion rule skipped: no held-out problems to score the two models on"
    try:
        model, metadata = load_artifact_model(target)
    except (TilecostError, ValueError) as exc:  # ArtifactError; CostModel.from_booster's other target or columns
        return None, f"promotion rule skipped: the artifact in {target} cannot be scored ({exc})"
    if metadata.device_class != device_class:
        return None, (f"promotion rule skipped: the artifact in {target} cannot be scored (a model of device "
                      f"class {metadata.device_class!r}, not {device_class!r})")  # fmt: skip
    seen = heldout_trained_on(metadata, heldout)
    if seen:
        return None, (f"promotion rule skipped: the artifact in {target} was trained on held-out problem(s) "
                      f"{seen[:5]}; its score would flatter it")  # fmt: skip
    theirs = evaluate_model(model, heldout, load_device(device_class))
    promoted, _, detail = judge(result.evaluation, theirs)
    words = "passed: beats" if promoted else "FAILED: does not beat"
    return promoted, f"promotion rule {words} the artifact in {target} ({detail})"


def _withhold(
    result: Any,
    staging: Path,
    target: Path,
    device_class: str,
    previous: str | None,
    why: str,
    check: str = "answer_gate",
) -> int:
    """A refused artifact: ``target`` stays, the staged one is kept as ``.<name>.withheld``, a registry promotion is
    withheld (:func:`.tracking.withhold_champion`: the version tagged ``check`` with ``why``); prints the verdict;
    exit status 3."""
    from .tracking import withhold_champion

    kept = target.with_name(f".{target.name}.withheld")
    _fresh(kept)
    staging.rename(kept)
    registry = ""
    if result.run is not None and result.run.promoted:
        run = result.run
        withhold_champion(run.tracking_uri, run.model_name, run.model_version, previous, why, check)
        registry = f"; registry: v{run.model_version} tagged {check}, the champion alias " + (
            f"back on v{previous}" if previous is not None else "left on it (no earlier champion)"
        )
    print(f"trained {device_class}; the new artifact is NOT swapped into {target}, which stays as it was: "
          f"{why}; the new one is kept in {kept}{registry}")  # fmt: skip
    return 3


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from .export import default_export_dir
    from .loading import evaluate_saved_model

    source = args.model_uri or str(args.artifact or default_export_dir(args.device_class))
    with registered_model_errors(args.model_uri, args.tracking_uri):
        evaluation, description = evaluate_saved_model(
            args.dataset,
            args.device_class,
            artifact=None if args.model_uri else Path(source),
            model_uri=args.model_uri,
            tracking_uri=args.tracking_uri,
            dtypes=args.dtypes,
            layouts=args.layouts,
            triton_version=args.triton_version,
        )
    print(description)
    print(evaluation.table(per_problem=not args.summary_only))
    s = evaluation.summary()
    print(f"evaluated {source} on {int(s['problems'])} held-out problems of {args.dataset}: "
          f"top-1 {s['top1_geomean']:.3f} (worst {s['top1_worst']:.3f}), top-5 {s['top5_geomean']:.3f}")  # fmt: skip
    return 0


def _cmd_refresh_measured(args: argparse.Namespace) -> int:
    from tilecost.predict.predictor import shipped_devices

    from .export import default_export_dir
    from .refresh import refresh_every_table, refresh_measured

    if args.artifact is None and args.device_class not in shipped_devices():
        raise ValueError(
            f"--device-class {args.device_class!r} has no shipped model (shipped: {', '.join(shipped_devices())}); "
            "name the artifact to refresh with --artifact DIR"
        )
    artifact = Path(args.artifact) if args.artifact else default_export_dir(args.device_class)
    if args.all:
        if args.for_device is not None or args.out is not None:
            raise ValueError("--all refreshes the artifact in place, every table: give it without --for and --out")
        results, not_refreshed = refresh_every_table(artifact, args.dataset)
        for line in [*(result.summary() for result in results), *not_refreshed]:
            print(line)
        return 0
    result = refresh_measured(artifact, args.dataset, out=args.out, for_device=args.for_device)
    print(result.summary())
    return 0


def register(sub: Any) -> None:
    """Add this package's subcommands to the CLI's subparsers. Imports nothing heavy."""
    p = sub.add_parser("train", help="fit the XGBoost cost model of a device class, evaluate, track, export")
    _add_data_options(p)
    p.add_argument("--seed", type=int, default=0,
                   help="XGBoost's sampling seed, recorded in the run (default 0); it matters only with a --param that "
                   "samples (subsample, colsample_bytree or hopeless_keep below 1): with the default settings every "
                   "seed gives the same model")  # fmt: skip
    p.add_argument("--param", action="append", type=_param, help="CostModel parameter NAME=VALUE (repeatable)")
    p.add_argument("--n-jobs", type=int, default=None, help="XGBoost threads (default: all cores)")
    p.add_argument("--cv-folds", type=int, default=0, help="also run grouped K-fold CV over training problems")
    export = p.add_mutually_exclusive_group()
    export.add_argument("--export-dir", default=None,
                        help="write the predictor artifact here (default: none; the shipped model is "
                        "tilecost/models/<device class>)")  # fmt: skip
    export.add_argument("--no-export", action="store_true",
                        help="write no predictor artifact (the default; kept for scripts)")  # fmt: skip
    p.add_argument("--gate", action="store_true",
                   help="with --export-dir DIR holding an artifact: export beside it and swap the new one in only "
                   "when it passes the nightly loop's two checks against DIR's on the held-out problems: the "
                   "promotion rule (a better score and a paired top-1 gain whose 90%% interval lies above 1; "
                   "skipped when DIR's model cannot be scored), then the answer gate (docs/NIGHTLY.md); otherwise "
                   "DIR stays, the new artifact is kept as .DIR.withheld, and the exit status is 3")  # fmt: skip
    p.add_argument("--no-promotion-rule", action="store_true",
                   help="with --gate: judge by the answer gate only, to replace a model the new one is level with "
                   "on purpose (e.g. after a feature change); the nightly loop always applies the rule")  # fmt: skip
    p.add_argument(
        "--tracking-uri", default=None, help="MLflow tracking URI (default $MLFLOW_TRACKING_URI or sqlite:///mlflow.db)"
    )
    p.add_argument("--no-mlflow", action="store_true", help="do not log the run to MLflow")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("evaluate", help="evaluate a trained model on the held-out problems, with baselines")
    _add_data_options(p)
    add_model_source(p)
    p.add_argument("--summary-only", action="store_true", help="omit the per-problem lines")
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser(
        "refresh-measured", help="rebuild an artifact's tuning database (measured.json) from a dataset, no retraining"
    )
    p.add_argument("--dataset", default=str(SHIPPED_DATASET),
                   help="dataset root, a path or pyarrow URI (default %(default)s: the shipped dataset)")  # fmt: skip
    p.add_argument("--device-class", default="h200", help="the shipped model to refresh (default %(default)s)")
    p.add_argument("--artifact", default=None, help="artifact directory (default: the shipped model of the class)")
    p.add_argument("--out", default=None, help="write the refreshed artifact here, a new directory (default: in place)")
    p.add_argument("--for", dest="for_device", default=None, metavar="DEVICE",
                   help="another device class's measured bests (e.g. h100_sxm), kept in the artifact beside its own "
                   "(measured-DEVICE.json) for predictors loaded for that class")  # fmt: skip
    p.add_argument("--all", action="store_true",
                   help="in place, the artifact's own table and then every other device class's it holds or "
                   "the dataset has rows of (as the nightly loop does); one the dataset cannot refresh is kept, "
                   "and said")  # fmt: skip
    p.set_defaults(func=_cmd_refresh_measured)
