"""A cluster profile with its placeholders still in: one line naming the file and each key."""

from pathlib import Path

from mptbench.plan.profile import check_profiles, profile_dirs

ROOT = Path(__file__).resolve().parents[2]


def test_the_profiles_a_command_line_reads():
    assert profile_dirs(["snakemake", "--profile", "profiles/slurm"], {}) == ["profiles/slurm"]
    assert profile_dirs(["snakemake", "--profile=p"], {"SNAKEMAKE_PROFILE": "q"}) == ["p"]
    assert profile_dirs(["snakemake", "--cores", "2"], {"SNAKEMAKE_PROFILE": "q"}) == ["q"]
    assert profile_dirs(["snakemake", "--cores", "2"], {}) == []


def test_the_shipped_slurm_profile_names_every_placeholder():
    line = check_profiles(["snakemake", "--profile", "profiles/slurm"], ROOT, {})
    assert line == (
        "profiles/slurm/config.yaml: fill in default-resources.slurm_account, "
        "default-resources.slurm_partition, set-threads.calibrate, set-threads.probe, "
        "set-threads.train for your site first (still CHANGE_ME; "
        "docs/guide/clusters.md#running-on-a-cluster-slurm)"
    )
    assert check_profiles(["snakemake", "--profile", "profiles/default"], ROOT, {}) is None


def test_a_filled_in_profile_passes(tmp_path):
    text = (ROOT / "profiles/slurm/config.yaml").read_text().replace("CHANGE_ME", "x")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "config.yaml").write_text(text)
    assert check_profiles(["snakemake", "--profile", "site"], tmp_path, {}) is None


def test_values_given_on_the_command_line_fill_the_placeholders():
    argv = ["snakemake", "--profile", "profiles/slurm", "--default-resources",
            "slurm_account=test", "slurm_partition=debug", "mem_mb=1000", "--set-threads",
            "calibrate=2", "probe=2", "--config", "experiment=smoke"]
    line = check_profiles(argv, ROOT, {})
    assert line.startswith("profiles/slurm/config.yaml: fill in set-threads.train for ")
    assert check_profiles([*argv[:10], "train=2"], ROOT, {}) is None
