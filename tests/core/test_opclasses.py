"""Which op class an op belongs to: the names below are from real TensorFlow 2.21 traces."""

import pytest

from mptbench.core.opclasses import CLASSES, OP_CLASSES, STEP_CLASSES, layer_of, op_class

SCOPES = {"model_scope": "seed_convnet", "optimizer_scope": "adam"}
TAPE = "StatefulPartitionedCall/gradient_tape/seed_convnet_1"


@pytest.mark.parametrize(
    ("op_type", "op_name", "expected"),
    [
        ("Conv2D", "StatefulPartitionedCall/seed_convnet_1/conv2d_1/convolution", "conv_forward"),
        ("_FusedConv2D", "StatefulPartitionedCall/seed_convnet_1/conv2d/Relu", "conv_forward"),
        ("Conv2DBackpropInput", f"{TAPE}/conv2d_2_1/convolution/Conv2DBackpropInput",
         "conv_backward_input"),
        ("Conv2DBackpropFilter", f"{TAPE}/conv2d_2_1/convolution/Conv2DBackpropFilter",
         "conv_backward_filter"),
        ("MatMul", "StatefulPartitionedCall/seed_convnet_1/dense_1/MatMul", "matmul"),
        # oneDNN's names for the same ops (TF_ENABLE_ONEDNN_OPTS, on by default on AVX-512 CPUs).
        ("_MklNativeFusedConv2D", "StatefulPartitionedCall/seed_convnet_1/conv2d_2_1/Relu",
         "conv_forward"),
        ("_MklNativeConv2DBackpropInput", f"{TAPE}/conv2d_2_1/convolution/Conv2DBackpropInput",
         "conv_backward_input"),
        ("_MklNativeConv2DBackpropFilterWithBias", f"{TAPE}/conv2d_1/convolution/Conv2D",
         "conv_backward_filter"),
        ("_MklNativeFusedMatMul", "StatefulPartitionedCall/seed_convnet_1/dense_1/BiasAdd",
         "matmul"),
        ("_MklSoftmax", "StatefulPartitionedCall/seed_convnet_1/activation_1/Softmax",
         "elementwise"),
        ("FusedBatchNormV3", "StatefulPartitionedCall/seed_convnet_1/batch_normalization/x",
         "batch_norm"),
        ("Mul", f"{TAPE}/batch_normalization_1/batchnorm/mul_1/Mul", "batch_norm"),
        ("ReluGrad", f"{TAPE}/conv2d_1_2/ReluGrad", "elementwise"),
        ("BiasAddGrad", f"{TAPE}/conv2d_1_2/BiasAdd/BiasAddGrad", "elementwise"),
        ("Cast", "StatefulPartitionedCall/seed_convnet_1/conv2d_2_1/convolution/Cast", "cast"),
        ("Cast", f"{TAPE}/conv2d_2_1/convolution/Cast", "cast"),
        ("Cast", "StatefulPartitionedCall/adam/Cast_44", "optimizer"),
        ("Cast", "StatefulPartitionedCall/compile_loss/sparse_categorical_crossentropy/Cast",
         "other"),
        ("IsFinite", "StatefulPartitionedCall/IsFinite_8", "loss_scaling"),
        ("All", "StatefulPartitionedCall/All_8", "loss_scaling"),
        ("Sub", "StatefulPartitionedCall/cond/then/_61/cond/adam/Sub_35", "optimizer"),
        ("AssignVariableOp", "StatefulPartitionedCall/AssignVariableOp_3", "optimizer"),
        # tf.data's own threads overlap the step; the step waiting for its batch is input.
        ("Dataset", "Iterator::Root::Prefetch::ParallelMapV2", "background_input"),
        ("IteratorGetNext", "IteratorGetNext", "input"),
        ("ArgMax", "StatefulPartitionedCall/compile_metrics/accuracy/ArgMax", "other"),
    ],
)
def test_op_classes(op_type, op_name, expected):
    assert op_class(op_type, op_name, **SCOPES) == expected


def test_every_class_has_a_name_and_only_the_ops_classes_are_classed_from_ops():
    assert len(CLASSES) == len(dict(CLASSES)) == 15
    assert {c for c, _ in CLASSES} == {*OP_CLASSES, "framework", "idle", "unattributed"}
    # Background input overlaps the step: every class but it adds up to the step.
    assert set(STEP_CLASSES) == {c for c, _ in CLASSES} - {"background_input"}


LAYERS = {"conv2d": "Conv2D", "conv2d_1": "Conv2D", "conv2d_14": "Conv2D",
          "block_1_depthwise": "DepthwiseConv2D"}


@pytest.mark.parametrize(
    ("op_name", "model_scope", "expected"),
    [
        # Forward and backward under the model's scope, both suffixed as Keras re-enters them.
        ("StatefulPartitionedCall/seed_convnet_1/conv2d_14_1/convolution", "seed_convnet",
         "conv2d_14"),
        ("StatefulPartitionedCall/gradient_tape/seed_convnet_1/conv2d_14_1/convolution/"
         "Conv2DBackpropInput", "seed_convnet", "conv2d_14"),
        # conv2d_1 entered again is conv2d_1_1; conv2d entered again is conv2d_1.
        ("seed_convnet_1/conv2d_1_1/Relu", "seed_convnet", "conv2d_1"),
        ("seed_convnet_1/conv2d_1/Relu", "seed_convnet", "conv2d"),
        ("seed_convnet/conv2d_1/Relu", "seed_convnet", "conv2d_1"),
        # A model name with dots (keras.applications'), a depthwise layer.
        ("StatefulPartitionedCall/mobilenetv2_1.00_96_1/block_1_depthwise_1/depthwise",
         "mobilenetv2_1.00_96", "block_1_depthwise"),
        # Outside every layer: the optimizer, the loss, an op right under the model's scope.
        ("StatefulPartitionedCall/cond/then/_61/cond/adam_4/Mul_35", "seed_convnet", None),
        ("StatefulPartitionedCall/compile_loss/sparse_categorical_crossentropy/Cast",
         "seed_convnet", None),
        ("StatefulPartitionedCall/seed_convnet_1/Cast", "seed_convnet", None),
    ],
)
def test_an_op_is_placed_in_the_layer_whose_scope_it_ran_in(op_name, model_scope, expected):
    assert layer_of(op_name, model_scope, LAYERS) == expected
    assert layer_of(op_name, None, LAYERS) is None and layer_of(op_name, model_scope, {}) is None
