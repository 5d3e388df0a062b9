"""A single-node SLURM on loopback, started from Debian's packages, for tests that need one."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
# The programs those packages bring; any one missing means installing them.
PROGRAMS = ("slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol", "munged", "munge")
SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# The executor's job step strips SLURM_* (SLURM_CONF too) before its inner srun, so the
# configuration must sit at the compiled-in default path; the original is put back on exit.
SLURM_CONF = Path("/etc/slurm/slurm.conf")
GRES_CONF = Path("/etc/slurm/gres.conf")
BACKUP_SUFFIX = ".mptbench-backup"
MARKER = "# Written by mptbench's tests/slurm_cluster.py"
CLUSTER = "mptbench-test"  # its ClusterName: SLURM sets SLURM_CLUSTER_NAME in each job

MUNGE_DIR = Path("/run/munge")
MUNGE_PID = MUNGE_DIR / "munged.pid"


class Unavailable(Exception):
    """This machine cannot host the test cluster (the reason is the message)."""


def _which(name: str) -> str | None:
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:{SBIN_PATH}")


def _run(args, timeout=60, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, check=False, **kwargs
    )


def install_packages(log=print) -> None:
    """Install slurmctld, slurmd, slurm-client and munge when missing, or raise Unavailable."""
    missing = [p for p in PROGRAMS if _which(p) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        raise Unavailable(f"not root, so cannot install {' '.join(PACKAGES)} ({missing} missing)")
    apt_get = _which("apt-get")
    if apt_get is None:
        raise Unavailable(f"no apt-get to install {' '.join(PACKAGES)} ({missing} missing)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive", "PATH": SBIN_PATH}
    # A fresh machine may still be running unattended upgrades: wait for dpkg's lock.
    install = [apt_get, "-o", "DPkg::Lock::Timeout=300", "install", "-y", *PACKAGES]
    log(f"installing {' '.join(PACKAGES)} with apt-get")
    done = _run(install, timeout=900, env=env)
    if done.returncode != 0:
        # A fresh machine has no package lists yet.
        _run([apt_get, "-o", "DPkg::Lock::Timeout=300", "update"], timeout=900, env=env)
        done = _run(install, timeout=900, env=env)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise Unavailable(f"apt-get install {' '.join(PACKAGES)} failed: {' | '.join(tail)}")
    still = [p for p in PROGRAMS if _which(p) is None]
    if still:
        raise Unavailable(f"apt-get installed {' '.join(PACKAGES)} but {still} are missing")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _alive_as(pid: int, name: str) -> bool:
    """Whether `pid` is a live process named `name` (a recycled pid is someone else's)."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return comm == name[:15] and stat.rsplit(")", 1)[1].split()[0] != "Z"


def _stop_by_pid_file(pid_file: Path, name: str, timeout: float = 20) -> None:
    pid = _read_pid(pid_file)
    if pid is None or not _alive_as(pid, name):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive_as(pid, name) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive_as(pid, name):
        os.kill(pid, signal.SIGKILL)


def _conf_value(text: str, key: str) -> str | None:
    for line in text.splitlines():
        k, sep, value = line.partition("=")
        if sep and k.strip().lower() == key.lower():
            return value.split()[0] if value.split() else None
    return None


def node_hardware() -> dict[str, str]:
    """What slurmd sees on this machine (`slurmd -C`): CPUs, sockets, cores, RealMemory."""
    done = _run([_which("slurmd") or "slurmd", "-C"])
    if done.returncode != 0:
        raise RuntimeError(f"slurmd -C failed: {done.stderr.strip()}")
    first = done.stdout.strip().splitlines()[0]
    fields = dict(item.split("=", 1) for item in first.split() if "=" in item)
    keep = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    return {k: fields[k] for k in keep if k in fields}


def end_strays() -> list[int]:
    """Kill what this cluster's jobs left running; their pids. Without cgroups
    (proctrack/linuxproc) SLURM finds a job's processes by parentage, so one reparented to init
    outlives scancel: a cancelled job's Snakemake job step once slept on for 90 minutes after
    its test. Each job's processes carry SLURM_CLUSTER_NAME, which only this cluster's have."""
    import psutil

    killed = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("SLURM_CLUSTER_NAME") == CLUSTER:
                proc.kill()
                killed.append(proc.pid)
        except psutil.Error:  # gone already, or not ours to read
            continue
    return killed


class SlurmCluster:
    """slurmctld, slurmd and (when none answers) munged on this host; a context manager.

    Entering installs the packages when missing (raising Unavailable where it cannot),
    writes /etc/slurm/slurm.conf (the original kept beside it and put back on exit), starts
    the daemons and waits until the node is idle. Exiting cancels the cluster's jobs and stops
    only the daemons it started, by their pid files.
    """

    def __init__(
        self, workdir: Path, partition: str = "debug", fake_gpu: bool = False, log=print
    ) -> None:
        self.workdir = Path(workdir)
        self.partition = partition
        # One GPU that is /dev/null: enough for SLURM to accept and place --gpus=1 jobs.
        self.fake_gpu = fake_gpu
        self.log = log
        self.node = socket.gethostname().split(".")[0]  # what `hostname -s` prints
        # The node's one feature: a kind of node a job can ask for (sbatch -C), as a cluster's
        # GPU types are.
        self.feature = "mptbench_kind_a"
        self.hardware: dict[str, str] = {}
        self.ctld_pid = self.workdir / "slurmctld.pid"
        self.slurmd_pid = self.workdir / "slurmd.pid"
        self.ctld_log = self.workdir / "slurmctld.log"
        self.slurmd_log = self.workdir / "slurmd.log"
        self._started_munged = False
        self._conf_written = False
        self._gres_moved = False
        self._gres_written = False

    @property
    def cpus(self) -> int:
        return int(self.hardware["CPUs"])

    @property
    def real_memory_mb(self) -> int:
        return int(self.hardware["RealMemory"])

    def __enter__(self) -> SlurmCluster:
        install_packages(self.log)
        if os.geteuid() != 0:
            raise Unavailable("not root, so cannot write /etc/slurm/slurm.conf or start daemons")
        self._clear_leftovers()
        if SLURM_CONF.exists() and self._controller_answers():
            raise Unavailable(f"a SLURM controller configured in {SLURM_CONF} is running here")
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self._conf_written:
                self._cancel_jobs()
                end_strays()
        finally:
            _stop_by_pid_file(self.slurmd_pid, "slurmd")
            _stop_by_pid_file(self.ctld_pid, "slurmctld")
            if self._started_munged:
                _stop_by_pid_file(MUNGE_PID, "munged")
            self._restore()

    def logs(self, lines: int = 40) -> str:
        """The daemons' last log lines, for a failure message."""
        out = []
        for path in (self.ctld_log, self.slurmd_log):
            text = path.read_text(errors="replace") if path.exists() else "(no log)"
            out.append(f"--- {path.name}\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(out)

    def slurm_conf(self) -> str:
        hw = " ".join(f"{k}={v}" for k, v in self.hardware.items())
        state, spool = self.workdir / "state", self.workdir / "spool"
        return "\n".join(
            [
                f"{MARKER} for a test run; the original is {SLURM_CONF}{BACKUP_SUFFIX} if any.",
                f"ClusterName={CLUSTER}",
                f"SlurmctldHost={self.node}(127.0.0.1)",
                # Ports of our own, so a SLURM installed on this machine is left alone.
                f"SlurmctldPort={_free_port()}",
                f"SlurmdPort={_free_port()}",
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/munge",
                f"StateSaveLocation={state}",
                f"SlurmdSpoolDir={spool}",
                f"SlurmctldPidFile={self.ctld_pid}",
                f"SlurmdPidFile={self.slurmd_pid}",
                f"SlurmctldLogFile={self.ctld_log}",
                f"SlurmdLogFile={self.slurmd_log}",
                # No cgroups: containers and CI machines may not delegate them.
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SwitchType=switch/none",
                "MpiDefault=none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core_Memory",
                "DefMemPerCPU=500",
                # Reject a request the node can never satisfy instead of leaving it pending.
                "EnforcePartLimits=ALL",
                # No slurmdbd: sacct has nothing to say, jobs are polled with squeue.
                "AccountingStorageType=accounting_storage/none",
                "JobAcctGatherType=jobacct_gather/none",
                "JobCompType=jobcomp/none",
                # squeue must still list a finished job when the executor polls (the plugin
                # falls back to sacct below 3x its first status-check delay).
                "MinJobAge=600",
                "ReturnToService=2",
                "SchedulerType=sched/backfill",
                # GPUs are a known resource; the node has one only with fake_gpu.
                "GresTypes=gpu",
                f"NodeName={self.node} NodeAddr=127.0.0.1 {hw} Feature={self.feature}"
                + (" Gres=gpu:1" if self.fake_gpu else "")
                + " State=UNKNOWN",
                f"PartitionName={self.partition} Nodes={self.node} Default=YES"
                " MaxTime=INFINITE State=UP",
                "",
            ]
        )

    def _start(self) -> None:
        self.hardware = node_hardware()
        for sub in ("state", "spool"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        self._start_munged()
        backup = Path(f"{SLURM_CONF}{BACKUP_SUFFIX}")
        SLURM_CONF.parent.mkdir(parents=True, exist_ok=True)
        if SLURM_CONF.exists():
            shutil.copy2(SLURM_CONF, backup)
        self._conf_written = True
        SLURM_CONF.write_text(self.slurm_conf())
        if GRES_CONF.exists():
            # A site gres.conf would give our node GPUs; the GPU test needs it to have none.
            GRES_CONF.rename(f"{GRES_CONF}{BACKUP_SUFFIX}")
            self._gres_moved = True
        if self.fake_gpu:
            self._gres_written = True
            GRES_CONF.write_text(f"{MARKER}\nNodeName={self.node} Name=gpu File=/dev/null\n")
        self._daemon([_which("slurmctld"), "-c"], "slurmctld")
        self._daemon([_which("slurmd")], "slurmd")
        self._wait_idle()

    def _daemon(self, args, name) -> None:
        # Daemons keep inherited pipes open: send their start-up output to a file.
        with open(self.workdir / f"{name}.start.log", "w") as out:
            done = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{name} did not start (exit {done.returncode})\n{self.logs()}")

    def _start_munged(self) -> None:
        if self._munge_answers():
            return  # e.g. the package's service, started by apt-get on a systemd machine
        key = Path("/etc/munge/munge.key")
        munge_user = {"user": "munge", "group": "munge"}
        if not key.exists():
            _run([_which("mungekey"), "--create", f"--keyfile={key}"], **munge_user)
        MUNGE_DIR.mkdir(mode=0o755, exist_ok=True)
        shutil.chown(MUNGE_DIR, "munge", "munge")
        # munged refuses to run as root with root-owned files: run it as its own user.
        done = _run([_which("munged"), "--force", f"--pid-file={MUNGE_PID}"], **munge_user)
        if done.returncode != 0:
            raise RuntimeError(f"munged did not start: {done.stderr.strip()}")
        self._started_munged = True
        deadline = time.monotonic() + 20
        while not self._munge_answers():
            if time.monotonic() > deadline:
                raise RuntimeError("munged started but does not answer")
            time.sleep(0.2)

    @staticmethod
    def _munge_answers() -> bool:
        munge, unmunge = _which("munge"), _which("unmunge")
        if not (munge and unmunge):
            return False
        cred = _run([munge, "-n"], timeout=10)
        return (
            cred.returncode == 0 and _run([unmunge], input=cred.stdout, timeout=10).returncode == 0
        )

    @staticmethod
    def _controller_answers() -> bool:
        try:
            done = _run([_which("scontrol") or "scontrol", "ping"], timeout=20)
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0 and " is UP" in done.stdout

    def _wait_idle(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            done = _run([_which("sinfo"), "-h", "-N", "-n", self.node, "-o", "%t"], timeout=20)
            state = done.stdout.strip()
            if state == "idle":
                return
            time.sleep(0.5)
        reason = _run([_which("sinfo"), "-R"], timeout=20).stdout
        raise RuntimeError(f"node {self.node} is {state!r}, not idle\n{reason}\n{self.logs()}")

    def _cancel_jobs(self) -> None:
        if not self._controller_answers():
            return
        _run([_which("scancel"), f"--partition={self.partition}"], timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            queue = _run([_which("squeue"), "-h", "-t", "PD,R,CG", "-o", "%i"], timeout=20)
            if queue.returncode != 0 or not queue.stdout.strip():
                return
            time.sleep(0.5)

    def _restore(self) -> None:
        backup = Path(f"{SLURM_CONF}{BACKUP_SUFFIX}")
        if self._conf_written:
            if backup.exists():
                backup.replace(SLURM_CONF)
            else:
                SLURM_CONF.unlink(missing_ok=True)
            self._conf_written = False
        if self._gres_written:
            GRES_CONF.unlink(missing_ok=True)
            self._gres_written = False
        if self._gres_moved:
            Path(f"{GRES_CONF}{BACKUP_SUFFIX}").replace(GRES_CONF)
            self._gres_moved = False

    def _clear_leftovers(self) -> None:
        """Undo a run that was killed before it could clean up (our marker is in its conf)."""
        if not (SLURM_CONF.exists() and SLURM_CONF.read_text(errors="replace").startswith(MARKER)):
            return
        text = SLURM_CONF.read_text(errors="replace")
        for key, name in (("SlurmdPidFile", "slurmd"), ("SlurmctldPidFile", "slurmctld")):
            value = _conf_value(text, key)
            if value:
                _stop_by_pid_file(Path(value), name)
        self._conf_written = True
        self._gres_written = GRES_CONF.exists() and GRES_CONF.read_text().startswith(MARKER)
        self._gres_moved = Path(f"{GRES_CONF}{BACKUP_SUFFIX}").exists()
        self._restore()
