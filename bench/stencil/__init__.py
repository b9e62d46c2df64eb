"""Stencil and polyhedral benchmarks for post-tiling fusion (see run.py)."""
