"""Build the tensorflow-datasets cache of resized images from a verified archive."""

from _job import run

from mptbench.core.files import write_json
from mptbench.data import synthetic
from mptbench.data.builder import DatasetError
from mptbench.data.cache import prepare


def work():
    params = snakemake.params
    if params.builder == synthetic.BUILDER:
        write_json(snakemake.output.info, synthetic.prepared_info(params.dataset))
        return
    info = prepare(
        snakemake.input.archive, params.name, params.image_size, params.data_dir,
        threads=snakemake.threads, kind=params.builder, source=params.url,
        num_classes=params.dataset.get("num_classes"),
    )
    write_json(snakemake.output.info, info)


run(snakemake, work, (DatasetError,))
