"""The core: facts every process shares, importing nothing else of mptbench.

Policies, devices, a cell and its axes, the run record's fields, outcomes, intervals, atomic
files, op classes, and the job contract between a Snakemake job and the engine.
"""
