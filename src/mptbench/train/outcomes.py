"""How a cell ended. Every cell ends with one of these; anything else fails the job loudly.

ok           trained; timing recorded
oom          the device ran out of memory (as the published table records)
nonfinite    the loss became NaN or Inf
unsupported  TensorFlow has no kernel for this policy on this device (reason recorded)
over_budget  a probe predicted a step slower than train.max_step_seconds (prediction recorded)
"""

from __future__ import annotations

OUTCOMES = ("ok", "oom", "nonfinite", "unsupported", "over_budget")
# How the report and the terminal name each outcome.
WORDS = {
    "ok": "ok",
    "oom": "OOM",
    "over_budget": "over budget",
    "nonfinite": "NaN/Inf",
    "unsupported": "unsupported",
}


def classify_error(tf, exc: BaseException) -> tuple[str, str] | None:
    """Map TensorFlow's errors to an outcome and its reason; None means a real failure."""
    if isinstance(exc, tf.errors.ResourceExhaustedError):
        return "oom", str(exc).strip().splitlines()[0][:300]
    text = str(exc)
    kernel_errors = (
        tf.errors.UnimplementedError,
        tf.errors.NotFoundError,
        tf.errors.InvalidArgumentError,
    )
    if isinstance(exc, kernel_errors) and (
        "No registered" in text or "not supported" in text.lower() or "Unimplemented" in text
    ):
        return "unsupported", text.strip().splitlines()[0][:300]
    return None
