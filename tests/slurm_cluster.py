"""A single-node SLURM on loopback, started from Debian's packages, for tests that need one."""

from __future__ import annotations

import contextlib
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

MARKER = "# Written by mptbench's tests/slurm_cluster.py"
CLUSTER = "mptbench-test"  # its ClusterName: SLURM sets SLURM_CLUSTER_NAME in each job
DAEMONS = ("slurmctld", "slurmd", "munged")


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


def end_leftovers() -> list[int]:
    """Stop the daemons of a test cluster whose run was killed before it could stop them (their
    command line names a slurm.conf or munge key of ours); their pids."""
    import psutil

    ended = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] not in DAEMONS:
            continue
        for arg in proc.info["cmdline"] or ():
            conf = Path(arg.partition("=")[2] or arg)
            try:
                ours = conf.is_file() and conf.read_text(errors="replace").startswith(MARKER)
            except OSError:
                ours = False
            if ours:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
                    ended.append(proc.pid)
                break
    return ended


class SlurmCluster:
    """munged, slurmctld and slurmd on this host, every file of theirs in `workdir`; a context
    manager.

    Entering installs the packages when missing (raising Unavailable where it cannot), writes
    workdir/slurm.conf (and gres.conf beside it: SLURM reads it from slurm.conf's folder),
    starts a munged of its own on a socket and key in workdir, then the daemons on ports of their
    own, and waits until the node is idle. Nothing outside workdir is written, so a SLURM or
    munge installed on the machine is left as it is. Clients find the cluster through `env`:
    SLURM_CONF, and a PATH whose `srun` sets it again (the executor's job step drops every
    SLURM_* variable, SLURM_CONF too, before its inner srun). Exiting cancels the cluster's jobs
    and stops the daemons it started, by their pid files.
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
        self.conf = self.workdir / "slurm.conf"
        self.munge_dir = self.workdir / "munge"
        self.munge_socket = self.munge_dir / "munge.socket"
        self.bin = self.workdir / "bin"
        self.pids = {name: self.workdir / f"{name}.pid" for name in DAEMONS}
        self.ctld_log = self.workdir / "slurmctld.log"
        self.slurmd_log = self.workdir / "slurmd.log"

    @property
    def cpus(self) -> int:
        return int(self.hardware["CPUs"])

    @property
    def real_memory_mb(self) -> int:
        return int(self.hardware["RealMemory"])

    @property
    def env(self) -> dict[str, str]:
        """The environment a client of this cluster runs in: none of an outer allocation's
        SLURM_*/SBATCH_* variables, SLURM_CONF this cluster's, and `srun` the one that keeps it."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
        env["PATH"] = os.pathsep.join([str(self.bin), env.get("PATH", ""), SBIN_PATH])
        return {**env, "SLURM_CONF": str(self.conf)}

    def client(self, *args: str, timeout: float = 20) -> subprocess.CompletedProcess:
        """A SLURM command (squeue, sinfo, ...) run against this cluster."""
        return _run([_which(args[0]) or args[0], *args[1:]], timeout=timeout, env=self.env)

    def __enter__(self) -> SlurmCluster:
        install_packages(self.log)
        if os.geteuid() != 0:
            raise Unavailable("not root, so cannot start slurmd (it runs jobs as their user)")
        end_leftovers()
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.conf.exists():
                self._cancel_jobs()
                end_strays()
        finally:
            for name in DAEMONS:  # munged last: the others authenticate through it
                _stop_by_pid_file(self.pids[name], name)

    def logs(self, lines: int = 40) -> str:
        """The daemons' last log lines, for a failure message."""
        out = []
        for path in (self.ctld_log, self.slurmd_log, self.munge_dir / "munged.log"):
            text = path.read_text(errors="replace") if path.exists() else "(no log)"
            out.append(f"--- {path.name}\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(out)

    def slurm_conf(self) -> str:
        hw = " ".join(f"{k}={v}" for k, v in self.hardware.items())
        state, spool = self.workdir / "state", self.workdir / "spool"
        return "\n".join(
            [
                f"{MARKER} for a test run.",
                f"ClusterName={CLUSTER}",
                f"SlurmctldHost={self.node}(127.0.0.1)",
                # Ports of our own, so a SLURM installed on this machine is left alone.
                f"SlurmctldPort={_free_port()}",
                f"SlurmdPort={_free_port()}",
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/munge",
                f"AuthInfo=socket={self.munge_socket}",
                f"StateSaveLocation={state}",
                f"SlurmdSpoolDir={spool}",
                f"SlurmctldPidFile={self.pids['slurmctld']}",
                f"SlurmdPidFile={self.pids['slurmd']}",
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
        for sub in ("state", "spool", "bin"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        self._start_munged()
        self.conf.write_text(self.slurm_conf())
        # Written always: without one here, SLURM would read none, never a site's.
        gres = f"NodeName={self.node} Name=gpu File=/dev/null\n" if self.fake_gpu else ""
        (self.workdir / "gres.conf").write_text(f"{MARKER}\n{gres}")
        srun = self.bin / "srun"
        srun.write_text(f'#!/bin/sh\nSLURM_CONF="{self.conf}" exec {_which("srun")} "$@"\n')
        srun.chmod(0o755)
        self._daemon([_which("slurmctld"), "-c", "-f", str(self.conf)], "slurmctld")
        self._daemon([_which("slurmd"), "-f", str(self.conf)], "slurmd")
        self._wait_idle()

    def _daemon(self, args, name) -> None:
        # Daemons keep inherited pipes open: send their start-up output to a file.
        with open(self.workdir / f"{name}.start.log", "w") as out:
            done = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, timeout=60,
                                  env=self.env)
        if done.returncode != 0:
            raise RuntimeError(f"{name} did not start (exit {done.returncode})\n{self.logs()}")

    def _start_munged(self) -> None:
        """A munged of the cluster's own: its key, socket, pid, seed and log in workdir/munge.
        It runs as root (--force), as the daemons and the jobs do."""
        self.munge_dir.mkdir(mode=0o700, exist_ok=True)
        key = self.munge_dir / "munge.key"
        if not key.exists():
            done = _run([_which("mungekey"), "--create", f"--keyfile={key}"])
            if done.returncode != 0:
                raise RuntimeError(f"mungekey failed: {done.stderr.strip()}")
        done = _run([_which("munged"), "--force", f"--socket={self.munge_socket}",
                     f"--key-file={key}", f"--pid-file={self.pids['munged']}",
                     f"--log-file={self.munge_dir / 'munged.log'}",
                     f"--seed-file={self.munge_dir / 'munged.seed'}"])
        if done.returncode != 0:
            raise RuntimeError(f"munged did not start: {done.stderr.strip()}")
        deadline = time.monotonic() + 20
        while not self._munge_answers():
            if time.monotonic() > deadline:
                raise RuntimeError(f"munged started but does not answer\n{self.logs()}")
            time.sleep(0.2)

    def _munge_answers(self) -> bool:
        munge, unmunge = _which("munge"), _which("unmunge")
        if not (munge and unmunge):
            return False
        socket_arg = f"--socket={self.munge_socket}"
        cred = _run([munge, "-n", socket_arg], timeout=10)
        return (cred.returncode == 0
                and _run([unmunge, socket_arg], input=cred.stdout, timeout=10).returncode == 0)

    def _controller_answers(self) -> bool:
        try:
            done = self.client("scontrol", "ping")
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0 and " is UP" in done.stdout

    def _wait_idle(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = self.client("sinfo", "-h", "-N", "-n", self.node, "-o", "%t").stdout.strip()
            if state == "idle":
                return
            time.sleep(0.5)
        reason = self.client("sinfo", "-R").stdout
        raise RuntimeError(f"node {self.node} is {state!r}, not idle\n{reason}\n{self.logs()}")

    def _cancel_jobs(self) -> None:
        if not self._controller_answers():
            return
        self.client("scancel", f"--partition={self.partition}", timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            queue = self.client("squeue", "-h", "-t", "PD,R,CG", "-o", "%i")
            if queue.returncode != 0 or not queue.stdout.strip():
                return
            time.sleep(0.5)
