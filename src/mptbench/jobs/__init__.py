"""The job side: what runs in a Snakemake job's own Python and never imports a framework.
The supervisor of a train or probe job, the one launcher of the engine, MLflow, combining
repeats into a record, the budget's arithmetic, reading profiles, variants' environments."""
