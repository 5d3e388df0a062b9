"""Write an archive in Imagenette's (or CIFAR-10's) layout, and its .sha256, for offline runs."""

from pathlib import Path

from _job import run

from mptbench.data.fixtures import MAKERS


def work():
    archive = Path(snakemake.output.archive)
    made = MAKERS[snakemake.params.builder](archive, **snakemake.params.fixture)
    Path(snakemake.output.sha256).write_text(f"{made['sha256']}  {archive.name}\n")
    print(f"wrote {archive}: {made['train']} train / {made['validation']} validation images")


run(snakemake, work)
