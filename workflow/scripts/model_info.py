"""Build the model once and count it: that it builds, its parameters, its FLOPs per example."""

from _job import run

from mptbench.core.contract import ModelConfig, decode
from mptbench.core.files import read_json
from mptbench.jobs.launcher import EngineFailed
from mptbench.jobs.model_info import describe_model


def work():
    if snakemake.input.prepared:
        prepared = read_json(snakemake.input.prepared[0])
        size, classes = prepared["image_size"], len(prepared["classes"])
    else:
        size, classes = snakemake.params.shape["image_size"], snakemake.params.shape["num_classes"]
    model = decode(ModelConfig, snakemake.params.model)
    describe_model(model, size, classes, snakemake.output[0])


run(snakemake, work, (EngineFailed,))
