#!/usr/bin/env bash
# A one-node Slurm on this machine, from Debian 12's packages (Slurm 22.05, PMIx 4), for
# running megatron-c the way users do on clusters:  srun --mpi=pmix -n 8 ./megatron-c ...
# Run as root; no systemd needed (works in containers). Also meant to be read as a recipe:
#
#   1. packages: munge (authentication), slurmctld (controller), slurmd (node daemon),
#      slurm-client (srun, sinfo, scontrol), libpmix-dev (see below).
#   2. munged, with a key (the package makes one; made here if missing).
#   3. /etc/slurm/slurm.conf: one node, this host at 127.0.0.1, claiming 8 CPUs although the
#      machine may have 2 (SlurmdParameters=config_overrides), so an 8-task step fits.
#      No cgroups, KillOnBadExit=1 (comments in the file below say why).
#   4. slurmctld and slurmd as root, then wait (bounded) until the node is idle and check
#      that `srun --mpi=list` knows pmix.
#
#   bash test/integration/slurm-up.sh          bring it up; does nothing when already up
#   bash test/integration/slurm-up.sh --down   stop slurmd, slurmctld and munged
#   bash test/integration/slurm-up.sh --help   this text
#
# Environment: SLURM_CPUS [8] CPUs the node claims, SLURM_LOGDIR [/tmp/slurm] daemon logs,
# SLURM_UP_WAIT_S [60] how long to wait for the node.
# State: /var/spool/slurmctld, /var/spool/slurmd; pid files /run/slurmctld.pid, /run/slurmd.pid.
# A test cluster, not a real one: SlurmUser=root, no accounting, fake CPU count.
set -uo pipefail

NODE=$(hostname -s)
CPUS=${SLURM_CPUS:-8}
LOGDIR=${SLURM_LOGDIR:-/tmp/slurm}
CONF=/etc/slurm/slurm.conf
CTLD_LOG=$LOGDIR/slurmctld.log
SLURMD_LOG=$LOGDIR/slurmd.log
MUNGE_LOG=$LOGDIR/munged.log
CTLD_PID=/run/slurmctld.pid
SLURMD_PID=/run/slurmd.pid
WAIT_S=${SLURM_UP_WAIT_S:-60}

say()  { echo "slurm-up: $*"; }
die()  {   # die MESSAGE [LOG...]: print the message and the tail of each log, exit 1
    local msg=$1; shift
    echo "slurm-up: FAILED: $msg" >&2
    local f
    for f in "$@"; do
        [ -r "$f" ] || continue
        echo "---- last lines of $f ----" >&2
        tail -n 25 "$f" >&2
    done
    exit 1
}
running() { [ -r "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }   # running PIDFILE
# With a dead controller sinfo and srun retry for a while; never let them hang this script.
node_state() { timeout 5 sinfo -h -n "$NODE" -o %t 2>/dev/null | head -n1; }
has_pmix()   { timeout 15 srun --mpi=list 2>&1 | grep -q pmix; }

# --- stop: `--down` ----------------------------------------------------------------------
# Kills only the daemons this script started (by the PIDs in their pid files): SIGTERM, then
# SIGKILL after 10 s.
stop_slurm() {
    local f pid
    for f in "$SLURMD_PID" "$CTLD_PID"; do
        running "$f" || continue
        pid=$(cat "$f")
        kill "$pid" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
        rm -f "$f"
    done
}
down() {
    stop_slurm
    [ -S /run/munge/munge.socket.2 ] && munged --stop >/dev/null 2>&1
    say "down (slurmctld, slurmd, munged stopped)"
}

case "${1:-}" in
    --down) down; exit 0 ;;
    -h|--help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) echo "usage: $0 [--down|--help]" >&2; exit 2 ;;
esac

# --- 0. already up? ------------------------------------------------------------------------
# Both daemons alive, the node schedulable and the pmix plugin loadable: nothing to do.
if running "$CTLD_PID" && running "$SLURMD_PID" && command -v sinfo >/dev/null; then
    case "$(node_state)" in
        idle|mix|alloc|comp)
            if has_pmix; then
                say "already up: node $NODE $(node_state), $(sinfo -h -o %c -n "$NODE") CPUs, srun --mpi=pmix available"
                exit 0
            fi ;;
    esac
    say "daemons running but node not usable; restarting"
    down
fi

[ "$(id -u)" -eq 0 ] || die "must run as root (it installs packages, writes /etc/slurm, starts daemons)"
mkdir -p "$LOGDIR"

# --- 1. packages ---------------------------------------------------------------------------
# slurmctld (controller), slurmd (node daemon), slurm-client (srun, sinfo, scontrol),
# munge (authentication between them). slurm-wlm-basic-plugins ships mpi_pmix_v4.so, which
# dlopen()s /usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so -- the unversioned name only
# libpmix-dev provides; without it `srun --mpi=list` silently lacks pmix.
pkgs=(munge slurmctld slurmd slurm-client slurm-wlm-basic-plugins libpmix-dev)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get update -qq >"$LOGDIR/apt.log" 2>&1 ||
        ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$LOGDIR/apt.log" 2>&1; then
        die "apt-get install ${missing[*]}" "$LOGDIR/apt.log"
    fi
fi

# --- 2. munge ------------------------------------------------------------------------------
# One shared secret (/etc/munge/munge.key) authenticates every Slurm message. The package
# normally creates it; make one if not. munged runs as its own user when the package made one
# (as root otherwise); --force lets it start despite its strict checks of the permissions of
# its directories, which containers do not always satisfy.
mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
if [ ! -s /etc/munge/munge.key ]; then
    say "creating /etc/munge/munge.key"
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    chmod 400 /etc/munge/munge.key
fi
munge_ok() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }
if ! munge_ok; then
    rm -f /run/munge/munge.socket.2 /run/munge/munged.pid
    as=()
    if id munge >/dev/null 2>&1; then
        chown munge:munge /etc/munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge
        touch "$MUNGE_LOG"; chown munge "$MUNGE_LOG"
        as=(runuser -u munge --)
    fi
    "${as[@]}" munged --force --log-file="$MUNGE_LOG" >>"$MUNGE_LOG" 2>&1 ||
        die "munged did not start" "$MUNGE_LOG"
    for _ in $(seq 20); do munge_ok && break; sleep 0.25; done
    munge_ok || die "munge does not work (munge -n | unmunge fails)" "$MUNGE_LOG"
fi

# --- 3. slurm.conf -------------------------------------------------------------------------
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd
cat >"$CONF" <<EOF
# Written by megatron-c test/integration/slurm-up.sh: a one-node test cluster. Not for production.
ClusterName=megatron-c
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge

StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$CTLD_LOG
SlurmdLogFile=$SLURMD_LOG
SlurmctldDebug=info
SlurmdDebug=info

# No cgroups (containers often lack a writable cgroup tree): track a step's processes via
# /proc parentage and do no CPU binding. No accounting database.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none

# Tests ask for --mpi=pmix explicitly; plain srun stays MPI-agnostic.
MpiDefault=none

# Schedule by cores: the node below claims $CPUS single-thread cores, so -n $CPUS gets one
# "core" each. OverSubscribe=YES on the partition lets jobs that ask (--oversubscribe) share.
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core

# A task that dies abnormally (signal, or non-zero exit) makes Slurm kill the whole step at
# once (srun returns about 1 s later). Without it Slurm leaves the other tasks running: a rank
# that dies inside MPI is still caught by the pmix plugin (lost client, step aborted after a
# few seconds), but one that exits non-zero outside MPI, or after MPI_Finalize, leaves its
# peers to run or wait on their own. Slurm's own default is 0; srun --kill-on-bad-exit=0
# gives that behaviour back for a single step.
KillOnBadExit=1
# Seconds between SIGTERM and SIGKILL when a step is killed (default 30); also bounds how
# long the next job may wait ("queued and waiting for resources") behind a killed one.
KillWait=5
# A node that went DOWN (e.g. the daemons were restarted) comes back on its own once its
# slurmd registers with a valid configuration.
ReturnToService=2
SlurmdTimeout=300
InactiveLimit=0
MinJobAge=60

# SlurmdParameters=config_overrides: slurmd trusts the numbers below instead of the
# hardware it detects, so a 2-core machine offers $CPUS CPUs (8 ranks oversubscribe 2 cores:
# fine for correctness tests, useless for timing). RealMemory is nominal; memory is not a
# scheduled resource with CR_Core.
SlurmdParameters=config_overrides
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName=main Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF

# --- 4. daemons ----------------------------------------------------------------------------
# (Re)start both so that they read the configuration just written. Each forks into the
# background and writes its pid file. slurmctld -c starts from a clean state: no jobs or node
# states left over from an earlier run of this test cluster.
stop_slurm
rm -f "$CTLD_PID" "$SLURMD_PID"
: >"$CTLD_LOG"; : >"$SLURMD_LOG"
slurmctld -c       || die "slurmctld did not start" "$CTLD_LOG"
slurmd -N "$NODE"  || die "slurmd did not start" "$SLURMD_LOG"
# The forked daemons write their pid files a moment after the command returns.
for _ in $(seq 50); do [ -s "$CTLD_PID" ] && [ -s "$SLURMD_PID" ] && break; sleep 0.2; done

# --- 5. wait until the node is schedulable (bounded by wall time) --------------------------
# A daemon that exits during start-up (bad config, port taken, ...) fails at once.
hint() {   # a likely cause, from the logs
    if grep -qs 'Unable to resolve "(null)"' "$CTLD_LOG" "$SLURMD_LOG"; then
        echo 'the daemons cannot bind: getaddrinfo(AI_ADDRCONFIG) finds no non-loopback IPv4 address on this machine'
    elif grep -qs 'Address already in use' "$CTLD_LOG" "$SLURMD_LOG"; then
        echo 'port 6817 or 6818 is taken (another Slurm running?)'
    fi
}
deadline=$((SECONDS + WAIT_S))
state=""
while :; do
    running "$CTLD_PID"   || die "slurmctld exited during start-up. $(hint)" "$CTLD_LOG"
    running "$SLURMD_PID" || die "slurmd exited during start-up. $(hint)" "$SLURMD_LOG"
    state=$(node_state)
    case "$state" in idle|mix|alloc) break ;; esac
    [ $SECONDS -ge $deadline ] &&
        die "node $NODE not idle after ${WAIT_S}s (sinfo state: '${state:-none}'). $(hint)" "$CTLD_LOG" "$SLURMD_LOG"
    sleep 1
done

# --- 6. PMIx available to srun? ------------------------------------------------------------
has_pmix || die "srun --mpi=list has no pmix: $(timeout 15 srun --mpi=list 2>&1 | tr -s ' \n' ' ')"

say "up: node $NODE $state, $(sinfo -h -o %c -n "$NODE") CPUs, partition main; srun --mpi=pmix available (stop: $0 --down)"
