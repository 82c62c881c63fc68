# Sourced by the slurm/*.sbatch scripts: the environment and the launcher,
# written once. Not a script of its own.
#
# Environment (set in the submitting shell; sbatch passes it on):
#   MPICOLL_ROOT      the mpicoll checkout holding slurm/ and tests/
#                     (default: the directory sbatch was run from)
#   MPICOLL_VENV      a virtual environment with mpicoll and mpi4py
#                     (default: $MPICOLL_ROOT/.venv if it exists, else the
#                     python3 on PATH, e.g. after a `module load` below)
#   MPICOLL_LAUNCHER  srun (default) or mpiexec (the MPI library's own,
#                     started inside the allocation)
#   MPICOLL_SRUN_MPI  srun's --mpi plugin (default pmi2, which the MPICH
#                     wheel speaks; pmix for an MPI built with PMIx)
#   MPICOLL_RESULTS   where the scripts that write files put them (default:
#                     results/$SLURM_JOB_ID where sbatch was run, beside
#                     the job's log)
# shellcheck shell=bash

# A site's modules instead of a venv: uncomment and adapt.
# module load python/3.11 mpich/4.2

: "${MPICOLL_LAUNCHER:=srun}" "${MPICOLL_SRUN_MPI:=pmi2}"
MPICOLL_RESULTS=${MPICOLL_RESULTS:-$SLURM_SUBMIT_DIR/results/$SLURM_JOB_ID}

if [ -z "${MPICOLL_VENV:-}" ] && [ -x "$MPICOLL_ROOT/.venv/bin/python" ]; then
    MPICOLL_VENV=$MPICOLL_ROOT/.venv
fi
if [ -n "${MPICOLL_VENV:-}" ]; then
    # The venv's bin first: its python, and the MPI wheel's mpiexec.
    export PATH="$MPICOLL_VENV/bin:$PATH" VIRTUAL_ENV=$MPICOLL_VENV
fi

# Test clusters that advertise more CPUs than the node has cores (like
# slurm/local-cluster.sh) oversubscribe them: make MPICH yield, not spin.
if [ "${SLURM_CPUS_ON_NODE:-0}" -gt "$(nproc)" ]; then
    export MPIR_CVAR_ENABLE_HEAVY_YIELD=1
fi

# mpicoll_python N ARGS...: python -m mpi4py ARGS on N ranks of the
# allocation, with $MPICOLL_LAUNCHER. Under -m mpi4py an uncaught exception
# on any rank aborts the whole world; srun's --kill-on-bad-exit ends the
# step when a task exits non-zero without one.
mpicoll_python() {
    mpicoll_python_per_node "" "$@"
}

# mpicoll_python_per_node PER_NODE N ARGS...: the same with PER_NODE ranks
# on each node (N / PER_NODE nodes), where it matters where the ranks sit
# (slurm/calibrate.sbatch); an empty PER_NODE leaves it to the launcher:
# N tasks on as many of the allocation's nodes as N fills.
mpicoll_python_per_node() {
    local per_node=$1 n=$2 nodes placement=()
    shift 2
    nodes=$(( n < SLURM_NNODES ? n : SLURM_NNODES ))
    case $MPICOLL_LAUNCHER in
        srun)
            if [ -n "$per_node" ]; then
                nodes=$(( n / per_node ))
                placement=(--ntasks-per-node="$per_node")
            fi
            # the job's --ntasks-per-node (inherited) would contradict N
            env -u SLURM_NTASKS_PER_NODE srun --mpi="$MPICOLL_SRUN_MPI" \
                --kill-on-bad-exit=1 --ntasks="$n" --nodes="$nodes" \
                "${placement[@]}" python3 -m mpi4py "$@" ;;
        mpiexec)
            [ -n "$per_node" ] && placement=(-ppn "$per_node")
            mpiexec -n "$n" "${placement[@]}" python3 -m mpi4py "$@" ;;
        *)
            echo "MPICOLL_LAUNCHER must be srun or mpiexec, not $MPICOLL_LAUNCHER" >&2
            return 2 ;;
    esac
}

# mpicoll_check N: fail the job now, loudly, if N ranks do not make one
# MPI world (srun without a PMI the MPI library speaks starts N worlds of 1).
mpicoll_check() {
    mpicoll_python "$1" -m mpicoll.launch check
}

launcher=$MPICOLL_LAUNCHER
[ "$launcher" = srun ] && launcher="srun --mpi=$MPICOLL_SRUN_MPI"
echo "mpicoll job $SLURM_JOB_ID: $SLURM_NNODES node(s) ($SLURM_JOB_NODELIST)," \
    "$SLURM_NTASKS task(s), launcher $launcher, python $(command -v python3)"
