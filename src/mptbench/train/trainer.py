"""The trainer: the child process of a train job, in the variant's Python.

It starts TensorFlow, trains (or probes) one cell and writes the run record. The supervisor
started it and knows what to record if it dies.
"""

from __future__ import annotations

import argparse
import sys

from mptbench.files import read_json, write_json

MODULE = "mptbench.train.trainer"


def _probe(job: dict, startup: dict) -> int:
    from mptbench.train.budget import probe_cell

    probe = probe_cell(job["run"], read_json(job["prepared"])) | startup
    print(f"probe: {probe['step_s']:.3f} s/step at batch {probe['batch_size']}", flush=True)
    write_json(job["record"], probe)
    return 0


def _train(job: dict, startup: dict) -> int:
    from mptbench.train.cell import run_cell

    tracking = read_json(job["tracking"])
    probe = read_json(job["probe"]) if job.get("probe") else None

    def on_start(record: dict) -> None:
        # What the supervisor needs if this process is killed from here on.
        write_json(job["state"], {"record": record, "tracking_uri": tracking["tracking_uri"]})

    run = job["run"]
    record = run_cell(
        run, read_json(job["prepared"]), tracking, log=lambda line: print(line, flush=True),
        startup=startup, on_start=on_start, probe=probe,
    )  # fmt: skip
    record["config"] = run
    write_json(job["record"], record)
    ms = record.get("ms_per_step")
    print(
        f"{record['outcome']}" + (f": {ms:.1f} ms/step" if ms else ""), file=sys.stderr, flush=True
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, help="the supervisor's job file (JSON)")
    args = parser.parse_args(argv)
    job = read_json(args.job)
    from mptbench.measure.startup import import_tensorflow

    _, _, startup = import_tensorflow()
    return _probe(job, startup) if job.get("probe_only") else _train(job, startup)


if __name__ == "__main__":
    sys.exit(main())
