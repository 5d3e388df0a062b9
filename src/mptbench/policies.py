"""A dtype policy as its conf/policy yaml describes it: the only source of what a policy is.

The run record carries the policy's dict; the model, the peaks, the report and the diagnosis
all read its facts through `Policy`, so a new policy is one yaml file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DTYPES = ("float32", "float16", "bfloat16")
LOSS_SCALING = ("dynamic", "none")


@dataclass(frozen=True)
class Policy:
    name: str
    compute_dtype: str
    variable_dtype: str = "float32"
    loss_scaling: str = "none"

    @classmethod
    def of(cls, name: str, facts: dict[str, Any]) -> Policy:
        keys = ("compute_dtype", "variable_dtype", "loss_scaling")
        return cls(name=name, **{k: facts[k] for k in keys if facts.get(k) is not None})

    @property
    def keras_name(self) -> str:
        """Keras' name for these dtypes: `mixed_<compute>` keeps variables in float32."""
        if self.compute_dtype == self.variable_dtype:
            return self.compute_dtype
        return f"mixed_{self.compute_dtype}"

    @property
    def is_baseline(self) -> bool:
        return self.compute_dtype == "float32"

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


def policy_of_record(record: dict[str, Any]) -> Policy:
    """The policy a run record was measured under, from the config it carries."""
    facts = ((record.get("config") or {}).get("policy")) or {}
    name = record.get("policy") or facts.get("name")
    if not facts.get("compute_dtype"):
        # Records without their config (hand-made, or older) name a Keras policy.
        # Anything else has no known dtype: no peak, no MFU, rather than float32's by default.
        dtype = str(name).removeprefix("mixed_")
        facts = {"compute_dtype": dtype if dtype in DTYPES else "unknown"}
    return Policy.of(str(name), facts)


def order(policies: dict[str, str]) -> list[str]:
    """Policy names by compute dtype (float32, float16, bfloat16, others), then by name.

    `policies` maps a name to its compute dtype.
    """

    def key(name: str) -> tuple[int, str]:
        dtype = policies[name]
        return (DTYPES.index(dtype) if dtype in DTYPES else len(DTYPES), name)

    return sorted(policies, key=key)
