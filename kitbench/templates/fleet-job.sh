#!/bin/bash
# kitbench fleet {{action}}: one Slurm array task per {{per}} ({{count}} tasks); kitbench pins
# task i to node i of the list below after submitting the array held, then releases it.
# Rendered by kitbench {{version}} from kitbench/templates/fleet-job.sh; it reads as it runs.
#   tasks: {{plan}}
#SBATCH --job-name=kitbench-{{action}}
#SBATCH --array=0-{{last}}
#SBATCH --ntasks=1
#SBATCH --output={{logs}}/%A_%a.out
#SBATCH --error={{logs}}/%A_%a.err
{{sbatch_lines}}
set -u
out={{results}}/$SLURM_ARRAY_JOB_ID
node=${SLURMD_NODENAME:-$(hostname -s)}
mkdir -p "$out"
{{environment}}
echo "kitbench fleet: task $SLURM_ARRAY_TASK_ID of job $SLURM_ARRAY_JOB_ID on $node" >&2
{{command}}
code=$?
# The exit status survives where the controller forgets the job and no accounting keeps it.
echo "$code" > "$out/$node.exit"
exit "$code"
