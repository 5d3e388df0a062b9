"""Create the MLflow store and experiment before any train job writes to it."""

import argparse

import _bootstrap  # noqa: F401

from mptbench.dataset import write_json
from mptbench.tracking import init_experiment

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--uri", required=True)
parser.add_argument("--name", required=True)
parser.add_argument("--artifact-root", default="")
parser.add_argument("--system-metrics", choices=["true", "false"], default="true")
parser.add_argument("--output", required=True)
args = parser.parse_args()
info = init_experiment(
    args.uri, args.name, args.artifact_root or None, args.system_metrics == "true"
)
print(
    f"MLflow experiment {info['experiment_name']} ({info['experiment_id']}) "
    f"at {info['tracking_uri']}"
)
write_json(args.output, info)
