"""The report's "Does it still learn?" section, from the parity rule's files."""

from mptbench.report.parity import learning_sections

GROUP = {"machine": "m", "model": "seed_convnet", "backend": "tensorflow", "variant": "pypi",
         "device": "cpu"}


def test_a_check_cut_to_fit_its_budget_says_over_how_many_steps_and_why():
    figures = {"verdict": "follows the baseline", "why": "within its seed-to-seed spread",
               "end_loss": 2.1, "baseline_end_loss": 2.12, "gap": -0.02, "seed_spread": 0.03}
    shortened = ("24 steps, not train.parity_steps=200: float32's 200 would take 1000 s (its "
                 "timed step: 5.00 s a step) > train.parity_budget_s=120")
    parity = [GROUP | {"batch_size": 128, "baseline": "float32", "steps": 24, "outcome": "ok",
                       "left_out": {}, "shortened": shortened,
                       "policies": {"mixed_bfloat16": figures,
                                    "float32": {"verdict": "baseline"}}}]
    (section,) = learning_sections(parity)
    assert section["sentences"] == [
        "mixed_bfloat16 at batch 128, 24 steps: follows float32, within its seed-to-seed "
        "spread: end loss 2.1000 against float32's 2.1200 (gap -0.0200; float32's own "
        "seed-to-seed spread 0.0300)."]
    assert section["notes"] == [f"batch 128: {shortened}"]
