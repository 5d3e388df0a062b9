"""Write an archive in Imagenette's layout (and its .sha256) for the offline smoke run."""

import argparse
import json
from pathlib import Path

import _bootstrap  # noqa: F401

from mptbench.fixtures import make_imagenette_archive

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--archive", required=True)
parser.add_argument(
    "--options", default="{}", help="JSON: train_per_class, val_per_class, short_side"
)
args = parser.parse_args()
archive = Path(args.archive)
if args.builder == "cifar10":
    from mptbench.cifar import make_cifar10_archive as make
else:
    make = make_imagenette_archive
made = make(archive, **json.loads(args.options))
Path(f"{archive}.sha256").write_text(f"{made['sha256']}  {archive.name}\n")
print(
    f"wrote {archive}: {made['train']} train / {made['validation']} validation images, "
    f"sha256 {made['sha256']}"
)
