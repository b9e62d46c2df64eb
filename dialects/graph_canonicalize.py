"""Canonicalization patterns of the graph dialect (placeholder filled below)."""


def cast_patterns():
    return ()


def broadcast_patterns():
    return ()


def transpose_patterns():
    return ()


def reshape_patterns():
    return ()
