"""Op classes a user recognises, and which framework ops belong to each: the one mapping.

An op is classed by its type and, where the type alone cannot tell (an elementwise Mul is an
optimizer update inside the optimizer, a batch-norm statistic inside a BatchNorm layer, a Cast
a mixed-precision cast only inside the model), by the name scope it ran in. The first rule
that matches wins.
"""

from __future__ import annotations

import re

# (column, what the report calls it), in the report's order. The op classes are what the ops
# of a step took (their self time); framework is the executor's own time between them and idle
# its threads' waiting, both read off the timeline; unattributed is what of the profiled step
# none of those accounts for. Background input (tf.data's threads preparing the next batches
# while the step computes) overlaps the step and is not part of it.
CLASSES = (
    ("conv_forward", "convolution forward"),
    ("conv_backward_input", "convolution backward (input)"),
    ("conv_backward_filter", "convolution backward (filter)"),
    ("matmul", "matmul/dense"),
    ("batch_norm", "batch norm"),
    ("elementwise", "elementwise and activations"),
    ("cast", "casts"),
    ("loss_scaling", "loss scaling and finite checks"),
    ("optimizer", "optimizer update"),
    ("input", "input (the step waiting for its batch)"),
    ("other", "other"),
    ("framework", "framework (the executor between ops)"),
    ("idle", "idle (the step's threads waiting)"),
    ("unattributed", "unattributed"),
    ("background_input", "background input (tf.data, overlapping the step)"),
)
NAMES = dict(CLASSES)
# What the ops of the profile are classed into (framework, idle and unattributed are not ops).
OP_CLASSES = tuple(c for c, _ in CLASSES if c not in ("framework", "idle", "unattributed"))
# Classes that add up to the step: all but what overlaps it.
STEP_CLASSES = tuple(c for c, _ in CLASSES if c != "background_input")

# Ops classed by type alone, before any scope is looked at.
_FIRST = (
    ("background_input", r"Dataset"),  # the iterator's own threads (Iterator::Root::...)
    ("input", r"Iterator.*|IteratorGetNext.*|OptionalFromValue|OptionalGetValue"),
    ("loss_scaling", r"IsFinite|All"),
)
# oneDNN renames the ops it takes over (_MklNativeFusedConv2D, _MklNativeConv2DBackpropFilter
# WithBias, ...): a prefix and a suffix around TensorFlow's own type name.
_ONEDNN = r"_?(Mkl)?(Native)?(Fused)?"
_TYPES = (
    (
        "conv_backward_filter",
        _ONEDNN + r"(Conv[23]DBackpropFilter|DepthwiseConv2dNativeBackpropFilter)\w*",
    ),
    (
        "conv_backward_input",
        _ONEDNN + r"(Conv[23]DBackpropInput|DepthwiseConv2dNativeBackpropInput)\w*",
    ),
    ("conv_forward", _ONEDNN + r"(Conv[23]D|DepthwiseConv2dNative|FusedConv2D)\w*"),
    ("matmul", _ONEDNN + r"(MatMul|BatchMatMul|Einsum)\w*"),
    ("batch_norm", _ONEDNN + r"FusedBatchNorm\w*"),
    ("optimizer", r"ResourceApply\w*|Assign(Add|Sub)?VariableOp"),
)
_ELEMENTWISE = re.compile(
    _ONEDNN + r"(Relu|ReluGrad|Relu6|Elu|Selu|Gelu|Sigmoid|SigmoidGrad|Tanh|TanhGrad|Softmax|"
    r"LogSoftmax|BiasAdd|BiasAddGrad|Add|AddV2|AddN|Sub|Mul|RealDiv|DivNoNan|Div|Neg|Square|"
    r"SquaredDifference|Sqrt|Rsqrt|RsqrtGrad|SqrtGrad|Exp|Log|Pow|Maximum|Minimum|Mean|Sum|"
    r"Max|Min|Tile|Select|SelectV2|MaxPool|MaxPoolGrad|AvgPool|AvgPoolGrad|Erf|"
    r"SparseSoftmaxCrossEntropyWithLogits|SoftmaxCrossEntropyWithLogits)"
)


def _in_scope(name: str, scope: str | None) -> bool:
    """Whether an op ran inside a name scope (Keras may suffix it: seed_convnet_1)."""
    return bool(scope) and re.search(rf"(^|/){re.escape(scope.lower())}(_\d+)?/", name) is not None


def op_class(
    op_type: str, op_name: str, model_scope: str | None = None, optimizer_scope: str | None = None
) -> str:
    """The class of one op, from its type and the name scope it ran in.

    Only a Cast inside the model counts as a cast (the dtype policy's: inputs, variables and
    outputs changing precision); the optimizer's and the loss's bookkeeping casts (an
    iteration counter, integer labels) belong to the optimizer and to "other".
    """
    name = op_name.lower()
    for cls, pattern in _FIRST:
        if re.fullmatch(pattern, op_type):
            return cls
    if _in_scope(name, optimizer_scope):
        return "optimizer"
    if "loss_scale" in name:
        return "loss_scaling"
    if op_type == "Cast":
        return "cast" if _in_scope(name, model_scope) else "other"
    for cls, pattern in _TYPES:
        if re.fullmatch(pattern, op_type):
            return cls
    if re.search(r"batch_normalization|batchnorm", name):
        return "batch_norm"
    return "elementwise" if _ELEMENTWISE.fullmatch(op_type) else "other"


# Where an op ran outside every layer of the model (the optimizer, the loss, the input, the
# loss scale's checks): its row in the layers' breakdown.
OUTSIDE = "(outside the layers)"


def layer_of(op_name: str, model_scope: str | None, layers: dict[str, str]) -> str | None:
    """The model's layer an op ran in (forward, or its gradient under gradient_tape/): the
    name scope right under the model's, matched to the model's layer names (`layers`: name ->
    type). Keras suffixes a scope entered again (seed_convnet_1/conv2d_14_1/...): the
    model scope's suffix is taken off the layer's first. None outside every layer."""
    if not model_scope or not layers:
        return None
    own = re.compile(rf"{re.escape(model_scope)}(_\d+)?")
    parts = op_name.split("/")
    for i, part in enumerate(parts[:-1]):
        found = own.fullmatch(part)
        if found is None:
            continue
        scope, suffix = parts[i + 1], found.group(1) or ""
        for name in (scope.removesuffix(suffix) if suffix else scope, scope,
                     re.sub(r"_\d+$", "", scope)):
            if name in layers:
                return name
        return None
    return None
