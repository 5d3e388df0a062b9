"""Floating-point work of a training step, counted by the framework: TensorFlow's profiler on
the traced step's graph (FLOPs per op, from each op's registered cost), one example at a time.

Convention: a multiply-add is 2 FLOPs (TensorFlow's own for convolutions and matmuls). A
training step is the forward pass and the gradients the framework traces for it (with respect
to the weights, and to each layer's input where a layer below needs it), without the
optimizer's update (it does not grow with the batch). The FLOPs are split by kind: convolution
FLOPs are held to the convolution peak and dense (matmul) FLOPs to the matmul peak; the rest
(elementwise, normalisation, reductions) is counted apart and left out of MFU, as MFU
conventionally does.
"""

from __future__ import annotations

KINDS = ("conv", "matmul", "other")


def kind_of(op_class: str) -> str:
    if op_class.startswith("conv_"):
        return "conv"
    return "matmul" if op_class == "matmul" else "other"


def graph_flops(tf, graph) -> dict[str, int]:
    """FLOPs of a graph's ops, by kind."""
    from mptbench.measure.opclasses import op_class

    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    profile = tf.compat.v1.profiler.profile(graph=graph, options=options)
    totals = dict.fromkeys(KINDS, 0)
    for node in profile.children:
        op = graph.get_operation_by_name(node.name)
        totals[kind_of(op_class(op.type, op.name))] += int(node.total_float_ops)
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
