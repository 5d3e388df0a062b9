"""Train one grid cell and write its run record (JSON); the cell's settings come as JSON."""

import argparse
import json
import os
import sys

import _bootstrap  # noqa: F401

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument(
    "--run", required=True, help="the run's config (JSON), as the workflow composes it"
)
parser.add_argument("--prepared", required=True, help="the prepare rule's JSON")
parser.add_argument("--tracking", required=True, help="the tracking_init rule's JSON")
parser.add_argument("--record", required=True)
args = parser.parse_args()
run = json.loads(args.run)

# Before TensorFlow is imported: which device it may see, and the variant's settings.
device = run["device"]["name"]
os.environ["CUDA_VISIBLE_DEVICES"] = "" if device == "cpu" else device[3:]
for key, value in (run["variant"].get("env") or {}).items():
    os.environ[str(key)] = str(value)

from mptbench.dataset import write_json  # noqa: E402
from mptbench.train import run_cell  # noqa: E402

with open(args.prepared) as f:
    prepared = json.load(f)
with open(args.tracking) as f:
    tracking = json.load(f)
record = run_cell(run, prepared, tracking, log=lambda line: print(line, flush=True))
record["config"] = run
write_json(args.record, record)
print(
    f"{record['outcome']}: {record.get('ms_per_step', float('nan')):.1f} ms/step", file=sys.stderr
)
