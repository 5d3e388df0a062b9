"""Every threshold the diagnosis judges by, in one place, each with the reason for its value.

Speedups are not judged by a threshold: a speedup is "faster" or "slower" only when its whole
95% interval is above or below 1, and "the input pipeline ate the gain" only when the
compute-only speedup's interval lies wholly above the end-to-end one's.
"""

# The input-bound threshold (the step over its synthetic twin's) is core/stats.py's: the
# engine skips a twin that could not reach it.
from mptbench.core.stats import INPUT_BOUND  # noqa: F401

# A dtype whose calibrated peak is this much above float32's counts as fast math; below its
# inverse, as slow kernels. Mixed precision adds casts and (float16) loss scaling, so a peak
# less than 30% higher rarely pays for them; the same margin either way keeps noise in the
# calibration (a few percent) from deciding.
FAST_RATIO = 1.3

# A cell is said to have lost CPU to the hypervisor (steal time) where one of its processes lost
# at least this percent of the machine's: below it, a few percent of a shared host's noise, of
# the size a timed step spreads anyway; at it, the cell's ms/step is that much slower than the
# machine's own, which an interval over processes that all lost it cannot show.
STOLEN_NOTABLE = 5.0

# An op class "changed" between float32 and a mixed policy when its time per step moved by at
# least this share of float32's step: a profile of a few steps is noisier than the timed
# median, and smaller moves do not explain a speedup anyway.
BREAKDOWN_CHANGE = 0.02

# The profiler slows each op a little, so a step with more or shorter ops more. Where it slowed a
# policy's step and the baseline's by factors further apart than this (profiled over timed),
# their profiled ms are no fair split of the timed difference, and the sentence says so: on the
# AMD EPYC with AVX512_BF16, MobileNetV2 at 64 px, float32 1.73x, mixed_bfloat16 1.19x and
# mixed_bfloat16 with DepthwiseConv2D kept in float32 1.26x, where the profiles put the last
# 3.8 ms a step ahead of float32 and the timing 11 ms behind (bench/README.md).
PROFILE_SKEW = 0.15

# An unchanged class is worth naming ("batch norm did not change") when it took at least this
# share of float32's step.
BREAKDOWN_NOTABLE = 0.05

# Where Keras' train function took less than this share of the profiled step under either
# policy, the closure's sentence says how much it took: the rest is Python and callbacks
# around the step, and it is why such a closure reads low.
OUTSIDE_NOTED = 0.9
