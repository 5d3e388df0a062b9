"""Floating-point work of a training step, counted by the framework: TensorFlow's profiler on
the traced step's graph (FLOPs per op, from each op's registered cost), one example at a time;
or, without TensorFlow, from the traced JAX program (jaxpr_flops).

Convention: a multiply-add is 2 FLOPs (TensorFlow's own for convolutions and matmuls). A
training step is the forward pass and the gradients a training step executes (with respect to
the weights, and to each layer's input where a layer below needs it: the first layer's input
gradient is traced by TensorFlow's tape but never executed, and is not counted; JAX never
traces it), without the optimizer's update (it does not grow with the batch). The FLOPs are
split by kind: convolution FLOPs are held to the convolution peak and dense (matmul) FLOPs to
the matmul peak; the rest (elementwise, normalisation, reductions) is counted apart and left
out of MFU, as MFU conventionally does.
"""

from __future__ import annotations

from mptbench.core.opclasses import op_class

KINDS = ("conv", "matmul", "other")


def kind_of(op_class: str) -> str:
    if op_class.startswith("conv_"):
        return "conv"
    return "matmul" if op_class == "matmul" else "other"


def executed(graph) -> set[str]:
    """The ops a call of the graph runs: those its outputs depend on (data or control), as
    TensorFlow prunes the rest before it runs a function."""
    stack = [t.op for t in graph.outputs] + list(graph.control_outputs)
    seen: set[str] = set()
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        stack += [t.op for t in op.inputs] + list(op.control_inputs)
    return seen


# Ops TensorFlow's profiler registers no cost for (it counts them as 0): a depthwise
# convolution's gradients, each as costly as its forward pass, counted here from their shapes.
UNCOSTED = ("DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2dNativeBackpropInput")


def _uncosted_flops(op) -> int:
    """2 FLOPs per multiply-add: every element of the output gradient, once per filter tap."""
    out_backprop = op.inputs[2].shape
    filter_shape = op.outputs[0].shape if op.type.endswith("Filter") else op.inputs[1].shape
    taps = int(filter_shape[0]) * int(filter_shape[1])
    return 2 * taps * _size(out_backprop)


def graph_flops(tf, graph) -> dict[str, int]:
    """FLOPs of the graph's ops that run, by kind."""
    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    profile = tf.compat.v1.profiler.profile(graph=graph, options=options)
    runs = executed(graph)
    counted = {node.name: int(node.total_float_ops) for node in profile.children}
    totals = dict.fromkeys(KINDS, 0)
    for name in runs:
        op = graph.get_operation_by_name(name)
        flops = counted.get(name, 0)
        if op.type in UNCOSTED and not flops:
            flops = _uncosted_flops(op)
        totals[kind_of(op_class(op.type, op.name))] += flops
    return totals


def training_flops_per_example(tf, keras, network, input_shape, loss: str, labels_spec) -> dict:
    """FLOPs of one example's training step (forward and the traced gradients)."""
    loss_fn = keras.losses.get(loss)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            value = tf.reduce_mean(loss_fn(y, network(x, training=True)))
        return tape.gradient(value, network.trainable_variables)

    x = tf.TensorSpec((1, *input_shape), tf.float32)
    return graph_flops(tf, step.get_concrete_function(x, labels_spec).graph)


def forward_flops_per_example(tf, network, input_shape) -> dict:
    """FLOPs of one example's forward pass (inference)."""

    @tf.function
    def forward(x):
        return network(x, training=False)

    spec = tf.TensorSpec((1, *input_shape), tf.float32)
    return graph_flops(tf, forward.get_concrete_function(spec).graph)


# Where TensorFlow is not installed (a JAX-only machine), the same counts come from the traced
# JAX program: its convolutions and dot products, from their operands' shapes.
ELEMENTWISE = {
    "add", "sub", "mul", "div", "max", "min", "neg", "exp", "log", "rsqrt", "sqrt", "tanh",
    "logistic", "pow", "integer_pow", "square", "reduce_sum", "reduce_max", "select_n",
}


def _size(shape) -> int:
    total = 1
    for n in shape:
        total *= int(n)
    return total


def _eqn_flops(eqn) -> tuple[str, int]:
    name, out = eqn.primitive.name, eqn.outvars[0].aval
    if name == "conv_general_dilated":
        rhs = eqn.invars[1].aval.shape
        out_features = rhs[eqn.params["dimension_numbers"].rhs_spec[0]]
        # Each output element sums kernel positions x input features (per group). A strided
        # convolution's input gradient is a convolution over its output gradient dilated with
        # zeros (lhs_dilation): the taps that land on those zeros are no work, and are not
        # counted (as TensorFlow's count does not: the gradient costs what the forward does).
        dilated = _size(eqn.params.get("lhs_dilation") or ())
        return "conv", 2 * _size(out.shape) * (_size(rhs) // out_features) // max(dilated, 1)
    if name == "dot_general":
        (contracting, _), _ = eqn.params["dimension_numbers"]
        lhs = eqn.invars[0].aval.shape
        return "matmul", 2 * _size(out.shape) * _size(lhs[d] for d in contracting)
    if name in ELEMENTWISE:
        return "other", _size(getattr(out, "shape", ()))
    return "other", 0


def jaxpr_flops(jaxpr, totals: dict[str, int] | None = None, times: int = 1) -> dict[str, int]:
    """FLOPs of a jaxpr's equations by kind, nested programs (jit, custom gradients,
    checkpoints; a scan's body times its length) included."""
    totals = totals if totals is not None else dict.fromkeys(KINDS, 0)
    for eqn in jaxpr.eqns:
        kind, flops = _eqn_flops(eqn)
        totals[kind] += times * flops
        repeat = times * int(eqn.params.get("length", 1)) if eqn.primitive.name == "scan" else times
        for value in eqn.params.values():
            inner = getattr(value, "jaxpr", value)
            if hasattr(inner, "eqns"):
                jaxpr_flops(inner, totals, repeat)
    return totals


def jax_training_flops_per_example(jax, network, input_shape, loss: str, labels) -> dict:
    """FLOPs of one example's training step, from the traced gradient of the Keras model's
    stateless loss with respect to its trainable weights."""
    import keras
    import numpy as np

    loss_fn = keras.losses.get(loss)
    trainable = [v.value for v in network.trainable_variables]
    frozen = [v.value for v in network.non_trainable_variables]

    def value(weights, x, y):
        predictions, _ = network.stateless_call(weights, frozen, x, training=True)
        return jax.numpy.mean(loss_fn(y, predictions))

    x = np.zeros((1, *input_shape), np.float32)
    return jaxpr_flops(jax.make_jaxpr(jax.grad(value))(trainable, x, labels).jaxpr)


def jax_forward_flops_per_example(jax, network, input_shape) -> dict:
    import numpy as np

    x = np.zeros((1, *input_shape), np.float32)
    return jaxpr_flops(jax.make_jaxpr(lambda x: network(x, training=False))(x).jaxpr)
