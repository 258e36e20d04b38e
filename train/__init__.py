"""tilecost.train: fit the XGBoost cost model per device class, evaluate it, track it in MLflow."""

__all__: list[str] = []
