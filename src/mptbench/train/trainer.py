"""The trainer: a child process of a train or probe job, in the variant's Python.

It starts the cell's Keras backend, runs what its job file asks (one repeat of a cell, or the
probe) and writes the result where the job says. The supervisor started it and knows what to
record if it dies.
"""

from __future__ import annotations

import argparse
import sys

from mptbench.files import read_json, write_json

MODULE = "mptbench.train.trainer"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, help="the supervisor's job file (JSON)")
    args = parser.parse_args(argv)
    job = read_json(args.job)
    from mptbench.backends import of_run, start

    # Only the cell's backend is imported (a JAX cell on synthetic data needs no TensorFlow).
    session = start(of_run(job["run"]).name)
    prepared = read_json(job["prepared"])
    if job["mode"] == "probe":
        from mptbench.measure.fingerprint import fingerprint
        from mptbench.train.budget import probe_cell

        result = probe_cell(session, job["run"], prepared)
        device = job["run"]["cell"]["device"]
        facts = fingerprint(session.backend, session.framework, session.keras, device)
        result["fingerprint"] = facts | session.facts
        steps = ", ".join(
            f"{p['step_s']:.3f} s at batch {p['batch_size']}" for p in result["points"]
        )
        print(f"probe: {steps}", flush=True)
    else:
        from mptbench.train.cell import run_repeat

        result = run_repeat(session, job["run"], prepared, job["repeat"], job.get("profile_dir"))
        print(f"repeat {job['repeat'] + 1}: {result['outcome']}", flush=True)
    write_json(job["out"], result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
