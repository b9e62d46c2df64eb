"""mlfuse's passes: one module per pass flag, each a thin wrapper over mlfuse's libraries."""
