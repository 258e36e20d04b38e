#!/usr/bin/env bash
# Keep the working tree that a device call sends under the device tool's 64 MiB (its README, "Limits").
#   bash scripts/device_tree.sh slim     before device calls that do not need the shipped model
#   bash scripts/device_tree.sh restore  right after them, before any commit
#   bash scripts/device_tree.sh size     the bytes that would travel now
# The tool sends tracked files and untracked files git does not ignore, so a tracked path can stay behind only
# while it is out of git's index and ignored: `slim` takes SLIM_PATHS (default the shipped model, 33 MB of the
# 98 MB the tree held after the fourteenth session; collecting does not load it; SLIM_PATHS=datasets/measurements
# leaves the model for a call that loads it and reads no measurements, such as autotune) out of the index and into
# .git/info/exclude; the files stay on disk. SLIM_KEEP_RUNS (run ids) keeps those runs' Parquet files
# (`*--RUN.parquet`, or `RUN.parquet` once compacted) of the slimmed paths in the index, so that a collect resuming
# them skips what they measured; the other runs' ids go to .device-slim, which travels, and the round script
# refuses to resume them. SLIM_PATHS="tilecost/models/h200 datasets/measurements" SLIM_KEEP_RUNS="r14c r14d" sends
# the code, the plans and those runs' files (with the model alone out, the fourteenth session's tree was at the
# limit). `restore` puts
# everything slimmed back, whatever SLIM_PATHS says then. A commit made while slim would record the slimmed files
# as deleted: `slim` refuses to run twice and `restore` says when there is nothing to restore.
set -euo pipefail
cd "$(dirname "$0")/.."
PATHS=${SLIM_PATHS:-tilecost/models/h200}
EXCLUDE=.git/info/exclude
MARK="# device_tree.sh slim"
DROPPED=.device-slim  # the run ids whose Parquet files a slimmed tree leaves behind, one a line
size() { { git ls-files -z; git ls-files -z -o --exclude-standard; } | du -cb --files0-from=- | tail -1 | cut -f1; }
case ${1:-} in
slim)
    if grep -qF "$MARK" "$EXCLUDE" 2>/dev/null; then
        echo "already slim (run restore first)" >&2; exit 1
    fi
    # shellcheck disable=SC2086  # PATHS is a list of words
    git rm -r -q --cached -- $PATHS
    for run in ${SLIM_KEEP_RUNS:-}; do
        # shellcheck disable=SC2086
        find $PATHS -type f \( -name "*--$run.parquet" -o -name "$run.parquet" \) -print0 | xargs -0 -r git add -f --
    done
    for p in $PATHS; do printf '/%s/\n%s\n' "$p" "$MARK"; done >>"$EXCLUDE"  # each path, then the mark
    # The runs whose files stay behind, for the device: benchmarks/h200_round.sh refuses to resume one (it would
    # time its measured problems again). Untracked and not ignored, so it travels; `restore` deletes it.
    # shellcheck disable=SC2086
    find $PATHS -type f -name '*.parquet' ! -path '*/.*' -printf '%f\n' | sed 's/\.parquet$//; s/.*--//' | sort -u \
        | grep -vxF -f <(printf '%s\n' ${SLIM_KEEP_RUNS:-} "") >"$DROPPED" || true
    echo "slim: $PATHS out of the index; $(size) bytes travel. Run 'bash scripts/device_tree.sh restore' before committing." ;;
restore)
    if ! grep -qF "$MARK" "$EXCLUDE" 2>/dev/null; then
        echo "nothing to restore" >&2; exit 0
    fi
    # Drop each slimmed path's line and its mark from the exclude file, printing the paths (SLIM_PATHS may differ now).
    PATHS=$(python3 - "$EXCLUDE" "$MARK" <<'EOF'
import sys
path, mark = sys.argv[1], sys.argv[2]
lines = open(path).read().splitlines()
slimmed = {i for i in range(len(lines) - 1) if lines[i + 1] == mark}
open(path, "w").write("".join(l + "\n" for i, l in enumerate(lines) if l != mark and i not in slimmed))
print(" ".join(lines[i].strip("/") for i in sorted(slimmed)))
EOF
)
    # shellcheck disable=SC2086  # PATHS is a list of words
    git reset -q HEAD -- $PATHS
    rm -f "$DROPPED"
    echo "restored: $PATHS back in the index; $(size) bytes travel." ;;
size) echo "$(size) bytes travel (limit 67108864)" ;;
*) echo "usage: bash scripts/device_tree.sh slim|restore|size" >&2; exit 2 ;;
esac
