"""What TensorFlow's start-up lines say about its build."""

from mptbench.engine.environment import startup_facts

GUARD_LINE = (
    "I0000 00:00:1795945288.973987    2177 cpu_feature_guard.cc:227] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.\n"
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild "
    "TensorFlow with the appropriate compiler flags.\n"
    "I0000 00:00:1795945290.770468    2177 port.cc:153] oneDNN custom operations are on.\n"
)


def test_startup_facts_read_the_unused_instructions_and_onednn():
    facts = startup_facts(GUARD_LINE)
    assert facts == {"tf_unused_cpu_instructions": ["AVX2", "AVX512F", "FMA"], "onednn": "on"}
    assert startup_facts("")["tf_unused_cpu_instructions"] == []
