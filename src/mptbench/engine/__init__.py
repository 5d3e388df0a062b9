"""The engine: the only code that runs inside the variant's Python and imports a framework
(TensorFlow, JAX or PyTorch, through Keras). `python -m mptbench.engine JOB` runs one engine
job (core/jobs.py): a repeat of a cell, its probe, a calibration, a model's description or an
environment check. Frameworks are imported inside functions, after the backend is chosen."""
