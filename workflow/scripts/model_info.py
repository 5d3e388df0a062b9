"""Build the model once and count it: that it builds, its parameters, its FLOPs per example."""

from _job import run

from mptbench.files import read_json, write_json
from mptbench.measure.model_info import describe
from mptbench.train.models import one_hot_labels
from mptbench.train.networks import ModelError


def work():
    prepared, model = read_json(snakemake.input.prepared), snakemake.params.model
    info = describe(model, prepared["image_size"], len(prepared["classes"]), one_hot_labels(model))
    flops = info["training_flops_per_example"]
    print(f"{model['name']}: {info['parameters']} parameters, {sum(flops.values()) / 1e9:.3f} "
          f"GFLOP per example per training step ({flops})")  # fmt: skip
    write_json(snakemake.output[0], info)


run(snakemake, work, (ModelError,))
