"""`mlflow server` on a loopback port, for tests: started, waited for, stopped; started again
on the same port and store when a test takes it away and brings it back."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


class MlflowServer:
    def __init__(
        self,
        store: Path,
        artifacts: Path | None = None,
        app: str | None = None,
        env: dict | None = None,
        cwd: Path | None = None,
    ):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [str(Path(sys.executable).with_name("mlflow")), "server",
                        "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
                        "--backend-store-uri", f"sqlite:///{store}"]
        if artifacts:
            self.command += ["--artifacts-destination", str(artifacts)]
        if app:
            self.command += ["--app-name", app]
        # No job runner: MLflow 3 starts one (huey consumers) for GenAI jobs that no test asks
        # for, and it cost more CPU than the server itself.
        self.env = {**(os.environ if env is None else env),
                    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        self.cwd = cwd or store.parent
        self.log = self.cwd / f"mlflow-server-{self.port}.log"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> MlflowServer:
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                self.command, cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                urllib.request.urlopen(f"{self.url}/health", timeout=2).close()
                return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"mlflow server did not come up:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None

    def __enter__(self) -> MlflowServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
