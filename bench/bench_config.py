"""What checking the configuration costs at every snakemake start: compose + check of an
experiment, in a fresh process (imports included) and again in a warm one.

Each fresh process composes one experiment and reports, in milliseconds of its own CPU time
(the shared machine's other work left out): importing the plan, Hydra's composition, building
the schema (with jsonschema's import; the validator over it, a constructor call, falls in
validating), validating, and the rules across fields (checks.py). The warm
figures are the median of --repeats compose_config calls in one process, once the schema is
built. Prints one table; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from common import ROOT

CONF = ROOT / "conf"

# Run in a fresh interpreter: every phase timed on its own, as the Snakefile meets them.
FRESH = """
import json, sys, time
t0 = time.process_time()
from mptbench.plan import checks, compose, schema
t1 = time.process_time()
from hydra import compose as hydra_compose, initialize_config_dir
from omegaconf import OmegaConf
with initialize_config_dir(sys.argv[1], version_base="1.3"):
    cfg = OmegaConf.to_container(
        hydra_compose("config", overrides=[f"experiment={sys.argv[2]}"]), resolve=True)
t2 = time.process_time()
import jsonschema
schema.document()
t3 = time.process_time()
schema.validate(cfg)
t4 = time.process_time()
checks.check(cfg)
t5 = time.process_time()
ms = lambda a, b: round((b - a) * 1000, 1)
print(json.dumps({"import": ms(t0, t1), "hydra": ms(t1, t2), "schema_build": ms(t2, t3),
                  "validate": ms(t3, t4), "checks": ms(t4, t5), "total": ms(t0, t5)}))
"""


def fresh(experiment: str, runs: int) -> dict[str, float]:
    """Median of each phase over `runs` fresh processes."""
    rows = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", FRESH, str(CONF), experiment],
            check=True, capture_output=True, text=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {key: statistics.median(r[key] for r in rows) for key in rows[0]}


def warm(experiment: str, repeats: int) -> float:
    """Median ms of compose_config in a process that has composed once already."""
    import time

    from mptbench.plan import compose_config

    compose_config(CONF, experiment)
    times = []
    for _ in range(repeats):
        start = time.process_time()
        compose_config(CONF, experiment)
        times.append((time.process_time() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per experiment")
    parser.add_argument("--repeats", type=int, default=20, help="warm calls per experiment")
    args = parser.parse_args()
    phases = ("import", "hydra", "schema_build", "validate", "checks", "total")
    print("experiment  " + "  ".join(f"{p:>12}" for p in phases) + "  warm compose+check")
    for experiment in ("smoke", "benchmark"):
        cold = fresh(experiment, args.runs)
        row = "  ".join(f"{cold[p]:>12.1f}" for p in phases)
        print(f"{experiment:<10}  {row}  {warm(experiment, args.repeats):>18.1f}")
    print("(CPU ms; medians: fresh over --runs processes, warm over --repeats calls)")


if __name__ == "__main__":
    main()
