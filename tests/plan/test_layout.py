"""Where files live: a model's description, and each group's files in Snakemake's report."""

from pathlib import Path

from mptbench.plan import Cell, layout

ROOT = Path(__file__).resolve().parents[2]
DATASET = {"name": "imagenette2-320-smoke", "image_size": 32, "num_classes": 10}


def cell(device, policy="float32", batch_size=4):
    return Cell("box", "seed_convnet", "tensorflow", "pypi", device, policy, batch_size)


def test_a_models_description_is_named_after_its_config_and_datas_shape():
    model = {"kind": "layers"}
    path = layout.model_info("seed_convnet", model, DATASET)
    assert path == f"results/models/seed_convnet/{layout.model_key(model, DATASET)}.json"
    for other in ({"image_size": 64}, {"num_classes": 100}):
        assert layout.model_info("seed_convnet", model, {**DATASET, **other}) != path
    assert layout.model_info("seed_convnet", {"kind": "application"}, DATASET) != path
    # Another dataset of the same shape (a mirror, another Imagenette) shares it.
    assert layout.model_info("seed_convnet", model, {**DATASET, "name": "mirror"}) == path


def test_a_folder_of_images_keys_its_models_on_its_cache():
    folder = {"name": "my-images", "image_size": 32, "num_classes": None}
    path = layout.model_info("seed_convnet", {"kind": "layers"}, folder)
    renamed = layout.model_info("seed_convnet", {"kind": "layers"}, {**folder, "name": "b"})
    assert path != renamed


def test_each_group_shows_its_files_under_its_own_category():
    cells = [cell(d, p, b) for d in ("cpu", "gpu0") for p in ("float32", "x") for b in (4, 8)]
    shown = layout.group_reports(cells, "results/smoke/report")
    assert len(shown) == 2 * len(layout.GROUP_FILES)
    paths = {path: spec for path, spec in shown}
    table = paths["results/smoke/report/box/seed_convnet/tensorflow/pypi/gpu0/table.csv"]
    assert table["category"] == "box · seed_convnet · tensorflow · pypi · gpu0"
    assert table["labels"] == {
        "machine": "box",
        "model": "seed_convnet",
        "backend": "tensorflow",
        "variant": "pypi",
        "device": "gpu0",
        "figure": "table",
    }


def test_every_group_files_caption_exists():
    """Captions are named as workflow/rules/report.smk sees them: ../report/NAME.rst."""
    for _, spec in layout.group_reports([cell("cpu")], "r"):
        assert (ROOT / "workflow" / "rules" / spec["caption"]).resolve().is_file(), spec
