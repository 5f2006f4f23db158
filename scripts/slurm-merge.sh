#!/usr/bin/env bash
# Merges the N shard runs of a sweep into one run and writes its reports:
#   scripts/slurm-merge.sh MODEL N [OUT]
# The merged run lands in OUT/MODEL/creg-v1.0 (OUT defaults to outputs); the runner
# refuses shards whose manifests differ and warns when samples are missing.
set -euo pipefail
model=${1:?usage: slurm-merge.sh MODEL N [OUT]}
count=${2:?usage: slurm-merge.sh MODEL N [OUT]}
out=${3:-outputs}
RUNNER=${RUNNER:-target/release/runner}
shards=()
for ((i = 0; i < count; i++)); do
  d="$out/$model/creg-v1.0.shard-$i-of-$count"
  [ -f "$d/journal.jsonl" ] || { echo "missing shard run $d" >&2; exit 1; }
  shards+=("$d")
done
exec "$RUNNER" merge "${shards[@]}" --out "$out/$model/creg-v1.0"
