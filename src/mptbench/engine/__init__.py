"""The engine: the only code that runs inside the variant's Python and imports a framework
(TensorFlow, JAX or PyTorch, through Keras). `python -m mptbench.engine JOB` runs one engine
job (core/contract/): a repeat of a cell, its probe, a calibration, a model's description, an
environment check, a fit try or a parity comparison. Frameworks are imported inside functions,
after the backend is chosen."""
