#!/usr/bin/env bash
# A one-node Slurm on this machine, from Debian's packages, for running megatron-c the way users
# do on clusters: `srun --mpi=pmix -n 8 ./megatron-c ...`. Also a recipe to read:
#
#   1. packages: munge (authentication), slurmctld (controller), slurmd (node daemon),
#      slurm-client (srun, sinfo); Debian 12's Slurm 22.05 ships the mpi_pmix_v4 plugin.
#   2. munged with a key (the package makes one).
#   3. /etc/slurm/slurm.conf: one node, this host, with 8 CPUs although the machine may have 2:
#      SlurmdParameters=config_overrides makes slurmd accept the configured CPUs, so an 8-task
#      job step fits. No cgroups (containers rarely allow them): proctrack/linuxproc and
#      task/none. KillOnBadExit=1 so that a task that dies ends the whole step, as an MPI job
#      needs (megatron-c also notices dead peers itself).
#   4. slurmctld and slurmd as root, logs in $SLURM_LOGDIR [/tmp/slurm], then wait until the
#      node is idle and check that srun knows pmix.
#
#   bash test/integration/slurm-up.sh          # idempotent: does nothing when already up
#   bash test/integration/slurm-up.sh --down   # stops the daemons
#
# Environment: SLURM_CPUS [8], SLURM_LOGDIR [/tmp/slurm].
set -uo pipefail
CPUS=${SLURM_CPUS:-8}
LOGDIR=${SLURM_LOGDIR:-/tmp/slurm}
CONF=/etc/slurm/slurm.conf
HOST=$(hostname -s)

say() { echo "slurm-up: $*"; }
die() {
    echo "slurm-up: error: $*" >&2
    for f in "$LOGDIR"/slurmctld.log "$LOGDIR"/slurmd.log; do
        [ -f "$f" ] && { echo "--- tail of $f" >&2; tail -15 "$f" >&2; }
    done
    exit 1
}

if [ "${1:-}" = "--down" ]; then
    pkill -x slurmd; pkill -x slurmctld
    say "stopped slurmctld and slurmd"
    exit 0
fi

node_idle() { timeout 10 sinfo -h -n "$HOST" -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; }
if pgrep -x slurmctld >/dev/null && pgrep -x slurmd >/dev/null && node_idle; then
    say "already up ($HOST, $(sinfo -h -o %c) CPUs)"
    exit 0
fi
[ "$(id -u)" -eq 0 ] || die "needs root (daemons and /etc/slurm)"

# 1. packages
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null ||
    ! command -v srun >/dev/null; then
    say "installing munge and Slurm from Debian's packages"
    apt-get update -qq || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        munge slurmctld slurmd slurm-client >/dev/null || die "apt-get install of Slurm failed"
fi

# 2. munge
if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    chown munge:munge /etc/munge/munge.key 2>/dev/null
    chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null
if ! pgrep -x munged >/dev/null; then
    # --force: munged refuses some directory permissions inside containers otherwise
    if id munge >/dev/null 2>&1; then
        runuser -u munge -- /usr/sbin/munged --force || /usr/sbin/munged --force || die "munged did not start"
    else
        /usr/sbin/munged --force || die "munged did not start"
    fi
fi
munge -n </dev/null | unmunge >/dev/null 2>&1 || die "munge does not work (munge -n | unmunge failed)"

# 3. configuration
mkdir -p /etc/slurm "$LOGDIR" /var/spool/slurmctld /var/spool/slurmd
cat >"$CONF" <<CONFEOF
# written by megatron-c's test/integration/slurm-up.sh: one node, no cgroups
ClusterName=megatron-c
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
KillOnBadExit=1
ReturnToService=2
SlurmdParameters=config_overrides
SlurmdTimeout=300
InactiveLimit=0
MinJobAge=30
KillWait=5
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=1000 State=UNKNOWN
PartitionName=main Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONFEOF

# 4. daemons
pkill -x slurmd; pkill -x slurmctld
sleep 0.5
/usr/sbin/slurmctld -i || die "slurmctld did not start"
/usr/sbin/slurmd || die "slurmd did not start"
for _ in $(seq 1 60); do
    node_idle && break
    scontrol update nodename="$HOST" state=resume >/dev/null 2>&1
    sleep 1
done
node_idle || die "the node did not become idle within 60 s ($(sinfo -h -o '%t %E' 2>&1))"
timeout 10 srun --mpi=list 2>&1 | grep -q pmix || die "srun has no pmix plugin ($(srun --mpi=list 2>&1 | tr '\n' ' '))"
say "up: node $HOST idle with $(sinfo -h -o %c) CPUs; srun --mpi=pmix available"
