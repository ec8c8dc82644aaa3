"""Judging trajectories: the output contract, prompts, strategies and the pipeline that turns
a backend's replies into annotations. Only `pipeline` and `runs` touch the database."""
