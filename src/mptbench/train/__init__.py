"""A training cell: the supervisor, the trainer, timing, the budget and the model."""
