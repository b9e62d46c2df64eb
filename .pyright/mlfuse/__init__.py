# Import paths for pyright only (pyproject's [tool.pyright] extraPaths): setuptools installs dialects/ as
# mlfuse.dialects and passes/ as mlfuse.passes, which pyright cannot see in the checkout; these links show it.
