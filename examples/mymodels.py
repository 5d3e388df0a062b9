"""A model of your own for mptbench: model=python model.python.builder=mymodels:small_cnn."""

import keras


def small_cnn(input_shape, num_classes, policy):
    # Built under `policy` (set globally); keep the output activation in float32.
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Conv2D(32, 3, strides=2, padding="same", activation="relu")(inputs)
    x = keras.layers.Conv2D(64, 3, strides=2, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(num_classes)(x)
    outputs = keras.layers.Activation("softmax", dtype="float32")(x)
    return keras.Model(inputs, outputs, name="small_cnn")
