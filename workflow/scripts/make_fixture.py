"""Write an archive in Imagenette's (or CIFAR-10's) layout, and its .sha256, for offline runs."""

import argparse
import json
from pathlib import Path

import _bootstrap  # noqa: F401

from mptbench.cifar import make_cifar10_archive
from mptbench.fixtures import make_imagenette_archive

MAKERS = {"imagenette": make_imagenette_archive, "cifar10": make_cifar10_archive}

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--archive", required=True)
parser.add_argument("--builder", default="imagenette", choices=sorted(MAKERS))
parser.add_argument("--options", default="{}", help="JSON: the fixture's per-class counts, size")
args = parser.parse_args()
archive = Path(args.archive)
made = MAKERS[args.builder](archive, **json.loads(args.options))
Path(f"{archive}.sha256").write_text(f"{made['sha256']}  {archive.name}\n")
print(
    f"wrote {archive}: {made['train']} train / {made['validation']} validation images, "
    f"sha256 {made['sha256']}"
)
