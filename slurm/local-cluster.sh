#!/usr/bin/env bash
# A real Slurm on this one machine, for testing the batch scripts:
#   eval "$(bash slurm/local-cluster.sh up)"   # install if missing, start
#                                      # daemons, export SLURM_CONF (and
#                                      # MPIR_CVAR_CH4_NETMOD, see below)
#   sbatch slurm/bench-multinode.sbatch
#   bash slurm/local-cluster.sh status   # daemons and sinfo; exit 3 if down
#   bash slurm/local-cluster.sh down     # cancel jobs, stop our daemons
#
# Starts munged, slurmctld and one slurmd per fake node, all on 127.0.0.1
# on non-default ports, with config, state, sockets and logs under
# $MPICOLL_SLURM_DIR, so it never touches a site's /etc/slurm or a running
# munged. Needs root (slurmd launches the jobs) and installs Debian's
# slurmd, slurmctld, slurm-client and munge with apt-get when missing.
# No systemd: the daemons are started by hand and found again by their pid
# files, so `up` twice is harmless and `down` stops only these daemons.
#
# Environment:
#   MPICOLL_SLURM_DIR    where everything lives (default /tmp/mpicoll-slurm)
#   MPICOLL_SLURM_NODES  fake nodes, named node1..nodeN (default 2)
#   MPICOLL_SLURM_CPUS   CPUs each node advertises (default 8, more than
#                        the cores, so 8 ranks fit: config_overrides)
#   MPICOLL_SLURM_PORT   slurmctld's port; slurmd i listens on PORT+i
#                        (default 16817)
# Settings that work without systemd or cgroups: proctrack/linuxproc,
# task/none, select/cons_tres, no cgroups, MpiDefault=pmi2.
# Between ranks on different fake nodes, the MPICH 5.0.2 wheel's default
# UCX netmod loses ANY_SOURCE receives that follow messages of a few MiB
# (a plain mpi4py program hangs the same way, UCX_TLS=tcp too; untested on
# real nodes); its OFI netmod works, so `up` prints
# MPIR_CVAR_CH4_NETMOD=ofi to export with SLURM_CONF.
set -euo pipefail

dir=${MPICOLL_SLURM_DIR:-/tmp/mpicoll-slurm}
nodes=${MPICOLL_SLURM_NODES:-2}
cpus=${MPICOLL_SLURM_CPUS:-8}
port=${MPICOLL_SLURM_PORT:-16817}
conf=$dir/slurm.conf
socket=$dir/munge/munge.socket
export SLURM_CONF=$conf

# Install the Debian packages that are missing (root only).
install() {
    local missing=()
    command -v munged >/dev/null || missing+=(munge)
    command -v slurmctld >/dev/null || missing+=(slurmctld)
    command -v slurmd >/dev/null || missing+=(slurmd)
    command -v sbatch >/dev/null || missing+=(slurm-client)
    [ ${#missing[@]} -eq 0 ] && return
    echo "installing ${missing[*]}" >&2
    command -v apt-get >/dev/null || { echo "no apt-get to install ${missing[*]}" >&2; exit 1; }
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" >/dev/null
}

# The pid in pid file $1 if that process is alive and runs command $2.
alive() {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && grep -q "$2" "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
}

write_config() {
    cat >"$conf" <<CONF
# Written by slurm/local-cluster.sh: a one-machine test cluster.
ClusterName=mpicoll
# Job ids from the clock, not from 1: MPICH names its shared-memory
# segments after the job (PMI_JOBID), a killed job leaves them in /dev/shm,
# and a fresh cluster reusing ids 1, 2, ... meets them (MPI_Init then fails
# with "Out of memory", or hangs).
FirstJobId=$(( $(date +%s) % 10000000 + 1 ))
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmi2
SlurmdParameters=config_overrides
ReturnToService=2
# Finished jobs stay visible to scontrol for 10 minutes (no accounting
# database here); jobcomp/filetxt keeps a line per finished job.
MinJobAge=600
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
# A failed or cancelled step is SIGKILLed 2 s after SIGTERM (default 30).
KillWait=2
SchedulerParameters=sched_interval=1
MailProg=/bin/true
CONF
    local i
    for i in $(seq 1 "$nodes"); do
        echo "NodeName=node$i NodeAddr=127.0.0.1 Port=$((port + i)) CPUs=$cpus State=UNKNOWN"
    done >>"$conf"
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$conf"
}

up() {
    [ "$(id -u)" -eq 0 ] || { echo "local-cluster.sh needs root (slurmd runs jobs)" >&2; exit 1; }
    install
    mkdir -p "$dir"/{munge,state,spool,run,log}
    chmod 755 "$dir" "$dir/munge"  # munged: socket dir must be searchable
    if ! alive "$dir/run/slurmctld.pid" slurmctld >/dev/null; then
        write_config
    fi
    if ! alive "$dir/munge/munged.pid" munged >/dev/null; then
        [ -f "$dir/munge/munge.key" ] || mungekey -c -k "$dir/munge/munge.key"
        munged --socket="$socket" --key-file="$dir/munge/munge.key" \
            --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
            --seed-file="$dir/munge/munged.seed"
    fi
    if ! alive "$dir/run/slurmctld.pid" slurmctld >/dev/null; then
        slurmctld -f "$conf"
    fi
    local i
    for i in $(seq 1 "$nodes"); do
        if ! alive "$dir/run/slurmd-node$i.pid" slurmd >/dev/null; then
            mkdir -p "$dir/spool/node$i"
            slurmd -f "$conf" -N "node$i"
        fi
    done
    wait_idle
    echo "export SLURM_CONF=$conf MPIR_CVAR_CH4_NETMOD=ofi"
}

# Wait (at most 30 s) until every node is idle or allocated.
wait_idle() {
    local _
    for _ in $(seq 60); do
        if [ "$(sinfo -h -N -o '%t' 2>/dev/null | grep -cE '^(idle|alloc|mix)')" -eq "$nodes" ]; then
            return 0
        fi
        sleep 0.5
    done
    echo "nodes did not come up; see $dir/log" >&2
    sinfo -N >&2 || true
    exit 1
}

# SIGTERM to the daemons in pid files "$@" (each checked to be ours),
# then wait until all have exited.
stop() {
    local f name pid pids=()
    for f in "$@"; do
        name=$(basename "$f" .pid)
        pid=$(alive "$f" "${name%%-*}") || continue
        kill "$pid" && pids+=("$pid") && echo "stopping $name ($pid)"
    done
    for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    done
}

down() {
    local jobs=()
    if alive "$dir/run/slurmctld.pid" slurmctld >/dev/null; then
        mapfile -t jobs < <(squeue -h -o %i 2>/dev/null)
        [ ${#jobs[@]} -eq 0 ] || scancel "${jobs[@]}"
    fi
    shopt -s nullglob
    stop "$dir"/run/slurmd-*.pid "$dir/run/slurmctld.pid"
    stop "$dir/munge/munged.pid"  # last: the others use it to the end
}

# Print whether the daemon of pid file $1 (command $2) runs; false if not.
report() {
    local pid
    if pid=$(alive "$1" "$2"); then
        echo "$(basename "$1" .pid): running ($pid)"
    else
        echo "$(basename "$1" .pid): not running"
        return 1
    fi
}

status() {
    local rc=0 i
    report "$dir/munge/munged.pid" munged || rc=3
    report "$dir/run/slurmctld.pid" slurmctld || rc=3
    for i in $(seq 1 "$nodes"); do
        report "$dir/run/slurmd-node$i.pid" slurmd || rc=3
    done
    [ $rc -eq 0 ] && sinfo -N
    return $rc
}

case ${1:-} in
    up) up ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
