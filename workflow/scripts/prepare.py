"""Build the tensorflow-datasets cache of resized images from a verified archive."""

import argparse
import sys

import _bootstrap  # noqa: F401

from mptbench.dataset import DatasetError, prepare, write_json

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--archive", required=True)
parser.add_argument("--name", required=True, help="dataset name (part of the cache's key)")
parser.add_argument("--image-size", type=int, required=True)
parser.add_argument("--data-dir", required=True)
parser.add_argument("--threads", type=int, default=None, help="images decoded at once")
parser.add_argument("--builder", default="imagenette", choices=["imagenette", "cifar10"])
parser.add_argument("--info", required=True, help="JSON written when the cache is complete")
args = parser.parse_args()
try:
    info = prepare(
        args.archive,
        args.name,
        args.image_size,
        args.data_dir,
        log=lambda line: print(line, flush=True),
        threads=args.threads,
        kind=args.builder,
    )
except DatasetError as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(1)
write_json(args.info, info)
