"""What a run checks before its first job: one start per backend and variant the grid times on
a GPU, in the environment that variant runs in."""

import os

from smoke_plan import smoke_plan

from mptbench.plan import grid
from mptbench.plan.environment import gpu_checks, src_first


def test_each_backend_on_a_gpu_is_checked_once_per_environment_at_its_first_gpu():
    cfg, _ = smoke_plan("backend=[tensorflow,jax]", "variant=[pypi,pypi_onednn]")
    cells = grid(cfg, ["cpu", "gpu0", "gpu1"], ["box"])
    checks = gpu_checks(cfg, cells)
    # pypi_onednn runs in this environment as pypi does: TensorFlow starts once.
    assert sorted((backend, gpu, manifest) for backend, gpu, manifest, _ in checks) == [
        ("jax", "gpu0", None), ("tensorflow", "gpu0", None)]


def test_a_cpu_grid_or_gpus_on_other_nodes_start_nothing():
    cfg, cells = smoke_plan()
    assert gpu_checks(cfg, cells) == []
    cfg, _ = smoke_plan("device.check_present=false")
    assert gpu_checks(cfg, grid(cfg, ["gpu0"], ["box"])) == []


def test_a_variant_s_own_environment_is_checked_once_it_is_made(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg, _ = smoke_plan("variant=[source_avx2_fma]")
    cells = grid(cfg, ["gpu0"], ["box"])
    assert gpu_checks(cfg, cells) == []  # its venv comes later; its cells check then
    manifest = tmp_path / "resources/envs/source_avx2_fma.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("{}")
    assert [m for _, _, m, _ in gpu_checks(cfg, cells)] == ["resources/envs/source_avx2_fma.json"]


def test_this_checkouts_src_goes_first_on_the_path_once(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    src_first("/checkout/src")
    src_first("/checkout/src")  # the Snakefile is read again in every job
    assert os.environ["PYTHONPATH"].split(os.pathsep) == ["/checkout/src", "/elsewhere"]
    monkeypatch.delenv("PYTHONPATH")
    src_first("/checkout/src")
    assert os.environ["PYTHONPATH"] == "/checkout/src"
