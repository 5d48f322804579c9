#!/bin/bash
# kitbench fleet {{action}}: {{shape}}.
# Rendered by kitbench {{version}} from kitbench/templates/fleet-job.sh; it reads as it runs.
#   tasks: {{plan}}
#SBATCH --job-name=kitbench-{{action}}
{{layout}}
#SBATCH --output={{logs}}/{{log_name}}.out
#SBATCH --error={{logs}}/{{log_name}}.err
{{sbatch_lines}}
set -u
out={{results}}/${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}
node=${SLURMD_NODENAME:-$(hostname -s)}
mkdir -p "$out"
{{environment}}
{{prologue}}
echo "kitbench fleet: task ${SLURM_ARRAY_TASK_ID:-0} of job ${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID} on $node" >&2
{{command}}
code=$?
# The exit status survives where the controller forgets the job and no accounting keeps it.
echo "$code" > "$out/$node.exit"
exit "$code"
