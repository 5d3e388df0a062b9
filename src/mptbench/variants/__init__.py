"""TensorFlow variants: each in its own verified environment, and the source build."""
