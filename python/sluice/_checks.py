"""Checks of the arguments users pass, before they reach a PipelineDef."""

import operator

MOST_PROCESSES = 256  # a Python process pool's, the engine's kMostPythonProcesses


def whole(name, value, minimum=None, maximum=None):
    """`value` as an int when it is a whole number (an int, a numpy integer,
    a one-element integer tensor); TypeError naming `name` otherwise, and
    ValueError below `minimum` or above `maximum`."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a whole number, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be a whole number, got {value!r} ({type(value).__name__})") from None
    if minimum is not None and number < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {number}")
    return number
