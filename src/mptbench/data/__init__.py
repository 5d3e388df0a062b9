"""The data stage: download, reproducible archives, the tfds cache and the input pipeline."""
