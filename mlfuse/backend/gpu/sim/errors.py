"""The two ways a simulation fails: a `Fault` inside a thread, a `SimulationError` to the caller."""

from __future__ import annotations

from mlfuse.diagnostics import Diagnostic


class SimulationError(Diagnostic):
    """The simulated kernels did something a GPU would do wrongly, or not at all."""


class Fault(Exception):
    """Raised inside a thread; the scheduler turns it into a SimulationError with the thread's position."""

    def __init__(self, op_number: int, message: str):
        super().__init__(message)
        self.op_number = op_number
        self.message = message
