"""tilecost.predict: rank the candidates of a shape with an exported model (numpy only).

Never imports torch, triton, mlflow, pandas or tilecost.train: it runs inside compilers.
"""

from tilecost.predict.artifact import ARTIFACT_SCHEMA_VERSION, ArtifactMetadata, load_artifact, save_artifact

__all__ = ["ARTIFACT_SCHEMA_VERSION", "ArtifactMetadata", "load_artifact", "save_artifact"]
