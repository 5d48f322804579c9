"""A real Slurm cluster on this one host, posing as three nodes (n1, n2, n3).

Debian's slurm-wlm is built with multiple-slurmd support, so three slurmd
daemons on one host are three nodes of one partition. Everything lives in one
directory (configuration, state, logs, PID files; the spool, where slurmd keeps
its steps' sockets, is a short folder of its own under /tmp that ``spool``
links to, as a socket's path is at most 108 bytes and a checkout can be deep); ``SLURM_CONF``
points Slurm's daemons and commands at it, so nothing in /etc/slurm is
touched. Started in about a second and stopped by the PIDs it recorded, as a
pytest fixture (tests/conftest.py) or by hand:

    python tests/slurm_local.py up /tmp/kitlab      # then: export SLURM_CONF=/tmp/kitlab/slurm.conf
    python tests/slurm_local.py down /tmp/kitlab

Needs root, slurm-wlm and munge (``apt-get install slurm-wlm munge``; .ci/run
installs them); accounting (slurmdbd) is left out on purpose: kitbench must work
without it. With ``oci`` and runc installed, ``srun --container`` runs OCI
bundles through runc.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

NODES = ("n1", "n2", "n3")
PARTITION = "debug"
_PORTS = {"n1": 17001, "n2": 17002, "n3": 17003}
_MUNGE_SOCKET = Path("/run/munge/munge.socket.2")


def missing() -> str | None:
    """Why this host cannot run the cluster, or None when it can."""
    if os.geteuid() != 0:
        return "the local Slurm cluster needs root (its daemons run as root)"
    for tool in ("slurmctld", "slurmd", "sbatch", "munged"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} is not installed (apt-get install slurm-wlm munge)"
    return None


@dataclass
class Cluster:
    root: Path

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}


def _config(root: Path, spool: Path) -> str:
    host = socket.gethostname().split(".")[0]
    nodes = "\n".join(
        f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={_PORTS[n]} CPUs=2 RealMemory=2000 State=UNKNOWN"
        for n in NODES
    )
    return f"""ClusterName=kitlab
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort=16817
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=600
KillWait=5
ReturnToService=2
StateSaveLocation={root}/state
SlurmdSpoolDir={spool}/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
{nodes}
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


_OCI = """RunTimeQuery="runc --root={root}/runc state %n.%u.%j.%s.%t"
RunTimeKill="runc --root={root}/runc kill -a %n.%u.%j.%s.%t"
RunTimeDelete="runc --root={root}/runc delete --force %n.%u.%j.%s.%t"
RunTimeRun="runc --root={root}/runc run %n.%u.%j.%s.%t -b %b"
"""


def _munge() -> None:
    """munged is shared by every Slurm on the host: start it only when none answers."""
    if _MUNGE_SOCKET.exists() and subprocess.run(["munge", "-n"], capture_output=True, check=False).returncode == 0:
        return
    _MUNGE_SOCKET.parent.mkdir(parents=True, exist_ok=True)
    shutil.chown(_MUNGE_SOCKET.parent, "munge", "munge")
    subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], check=True)
    for _ in range(50):
        if subprocess.run(["munge", "-n"], capture_output=True, check=False).returncode == 0:
            return
        time.sleep(0.1)
    raise RuntimeError("munged did not start")


def up(root: Path, oci: bool = False) -> Cluster:
    cluster = Cluster(root)
    for sub in ("state", "log", "runc"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    link = root / "spool"
    if not link.is_symlink():
        link.symlink_to(tempfile.mkdtemp(prefix="kitlab-", dir="/tmp"))
    cluster.conf.write_text(_config(root, link.readlink()))
    oci_conf = root / "oci.conf"
    if oci and shutil.which("runc"):
        oci_conf.write_text(_OCI.format(root=root))
    _munge()
    env = cluster.env()
    subprocess.run(["slurmctld", "-c"], env=env, check=True)  # -c: a clean state, no jobs of old runs
    for node in NODES:
        subprocess.run(["slurmd", "-N", node], env=env, check=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done = subprocess.run(
            ["sinfo", "--noheader", "--format=%t", "--partition", PARTITION],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        states = done.stdout.split()
        if done.returncode == 0 and states and all(s == "idle" for s in states):
            return cluster
        time.sleep(0.2)
    down(root)
    raise RuntimeError(f"the local Slurm cluster did not come up; see {root}/log")


def down(root: Path) -> None:
    """Stop every daemon this cluster started, by the PIDs in its files (never munged: it is shared)."""
    for pid_file in sorted(root.glob("slurm*.pid")):
        with contextlib.suppress(ValueError, ProcessLookupError, FileNotFoundError):
            os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
    deadline = time.monotonic() + 10
    for pid_file in sorted(root.glob("slurm*.pid")):
        try:
            pid = int(pid_file.read_text().strip())
        except (ValueError, FileNotFoundError):
            continue
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
    link = root / "spool"
    if link.is_symlink():
        shutil.rmtree(link.readlink(), ignore_errors=True)
        link.unlink()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("up", "down"):
        raise SystemExit("usage: python tests/slurm_local.py up|down DIR")
    where = Path(sys.argv[2]).resolve()
    if sys.argv[1] == "up":
        why = missing()
        if why:
            raise SystemExit(f"ERROR: {why}")
        started = up(where, oci=True)
        print(f"export SLURM_CONF={started.conf}")
    else:
        down(where)
