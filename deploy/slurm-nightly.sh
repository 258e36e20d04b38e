#!/bin/bash
# The nightly loop on a Slurm cluster: collection sharded over a job array (one GPU per task, on as many nodes
# as the array gets), then one training step on a CPU node once every task has finished. Submit from cron or
# scrontab with: bash deploy/slurm-nightly.sh
# Both jobs get the same --night (the submission's UTC date), so a task that starts after midnight still
# works on the same night; the state directory and the dataset are on a filesystem every node shares.
set -euo pipefail
cd "${TILECOST_REPO:-$HOME/tilecost}"
export TILECOST_NIGHT=${TILECOST_NIGHT:-$(date -u +%F)}
mkdir -p logs
collect=$(sbatch --parsable --export=ALL deploy/slurm-nightly-collect.sbatch)
# afterany: train on whatever was collected even if a task failed; the training job reads every task's record
# and says which shard is incomplete. Use afterok to train only after a complete collection.
sbatch --dependency=afterany:"$collect" --export=ALL deploy/slurm-nightly-train.sbatch
