"""A dtype policy as its conf/policy yaml describes it: the only source of what a policy is.

A run carries its `Policy`, and its record the policy's facts (compute dtype, whether it is the
baseline); the model, the peaks, the report and the diagnosis read them there, so a new policy
is one yaml file. The baseline (the policy every other is compared with) is the one whose yaml
says `baseline: true`, whatever its name.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Policy:
    name: str
    compute_dtype: str
    variable_dtype: str = "float32"
    loss_scaling: str = "none"
    baseline: bool = False
    # Dynamic loss scaling starts here (Keras' default, 2**15, where the yaml says nothing).
    initial_loss_scale: float | None = None
    # Keras layer classes that compute in float32 under this policy (the rest in its dtype).
    float32_layers: tuple[str, ...] = ()

    @classmethod
    def of(cls, name: str, facts: dict[str, Any]) -> Policy:
        keys = ("compute_dtype", "variable_dtype", "loss_scaling", "baseline",
                "initial_loss_scale")
        found = {k: facts[k] for k in keys if facts.get(k) is not None}
        return cls(name=name, **found, float32_layers=tuple(facts.get("float32_layers") or ()))

    @property
    def keras_name(self) -> str:
        """Keras' name for these dtypes: `mixed_<compute>` keeps variables in float32."""
        if self.compute_dtype == self.variable_dtype:
            return self.compute_dtype
        return f"mixed_{self.compute_dtype}"

    def problem(self) -> str | None:
        """Why Keras cannot run these facts as written, or None."""
        if self.compute_dtype != self.variable_dtype and self.variable_dtype != "float32":
            return (
                f"variable_dtype {self.variable_dtype!r} with compute_dtype "
                f"{self.compute_dtype!r}: Keras keeps mixed policies' variables in float32"
            )
        if self.keras_name == "mixed_float16" and self.loss_scaling != "dynamic":
            return "loss_scaling 'none' with mixed float16: Keras' fit always scales its loss"
        return None


# A policy with some layer classes kept in float32, by its name: <policy>_keep_<Class>[_<Class>]
# (mixed_bfloat16_keep_DepthwiseConv2D). Asking for one makes it from its policy's yaml
# (plan/compose.py); it is compared with the baseline as any policy is.
KEEP = "_keep_"


def kept(name: str) -> tuple[str, tuple[str, ...]] | None:
    """(the policy, the layer classes it keeps in float32) a kept policy's name spells; None
    for any other name."""
    base, sep, classes = name.partition(KEEP)
    if not (base and sep and classes):
        return None
    return base, tuple(classes.split("_"))


def keeping(name: str, base_facts: dict[str, Any]) -> dict[str, Any]:
    """A kept policy's facts: its policy's, never the baseline, with its layer classes."""
    _, classes = kept(name)
    return {**base_facts, "baseline": False, "float32_layers": list(classes)}


def policy_of_record(record: dict[str, Any]) -> Policy:
    """The policy a run record was measured under, from the facts it carries."""
    name = str(record.get("policy"))
    if not record.get("compute_dtype"):
        # Hand-made records name a Keras policy and say nothing else. Anything that is not one
        # has no known dtype: no peak, no MFU, rather than float32's by default.
        dtype = name.removeprefix("mixed_")
        record = {"compute_dtype": dtype if dtype in DTYPES else "unknown",
                  "baseline": record.get("baseline")}
    policy = Policy.of(name, record)
    if record.get("baseline") is None:
        # A record that does not say: the policy that computes and stores in the first dtype
        # (float32) is the natural baseline.
        policy = replace(policy, baseline=policy.keras_name == DTYPES[0])
    return policy


def weighted_peak(calibration: dict, dtype: str, work: dict[str, float]) -> float | None:
    """TFLOP/s of `work` (FLOPs by kind: conv, matmul) at the calibrated peaks of `dtype`: a
    FLOP-weighted harmonic mean, so a model that is all convolution is held to the conv peak.
    Framework- and pandas-free: the report and bench/bench_gpu.py both read a cell's peak so."""
    if not sum(work.values()):
        return None
    rates = {kind: _tflops(calibration, kind, dtype) for kind in work if work[kind]}
    if not all(rates.values()):
        return None
    seconds = sum(work[kind] / (rates[kind] * 1e12) for kind in rates)
    return sum(work.values()) / seconds / 1e12


def _tflops(calibration: dict, kind: str, dtype: str) -> float | None:
    return ((calibration.get(kind) or {}).get(dtype) or {}).get("tflops")


def order(policies: dict[str, tuple[bool, str]]) -> list[str]:
    """Policy names: the baseline first, then by compute dtype (float32, float16, bfloat16,
    others), then by name. `policies` maps a name to (is the baseline, its compute dtype)."""

    def key(name: str) -> tuple[bool, int, str]:
        baseline, dtype = policies[name]
        return (not baseline, DTYPES.index(dtype) if dtype in DTYPES else len(DTYPES), name)

    return sorted(policies, key=key)
