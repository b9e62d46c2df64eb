"""Inlining of func.call: every call of a function the module defines becomes the
callee's body (MLIR's `inline` for single-block functions without side effects).

mlfuse compiles one entry function; its lowering has no calls between graph functions.
jax exports private helpers called from `main`, and compiler engineers write them too:
they are inlined before anything else (passes/inline.py runs first in every
pipeline, and the StableHLO conversion inlines before converting). A recursive call
cannot be inlined and is an error at the call; so is a callee of several blocks, or
one that is only declared (mlfuse has nothing to call it with).
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from mlfuse.diagnostics import Diagnostic, location_of


def calls_in(op: Operation, functions: dict[str, func.FuncOp]) -> list[func.CallOp]:
    return [c for c in op.walk() if isinstance(c, func.CallOp) and c.callee.string_value() in functions]


def check_no_recursion(functions: dict[str, func.FuncOp]) -> None:
    """A call cycle cannot be inlined: say where it starts."""
    state: dict[str, str] = {}  # name -> "open" while on the path, "done" after

    def visit(name: str) -> None:
        state[name] = "open"
        for call in calls_in(functions[name], functions):
            callee = call.callee.string_value()
            if state.get(callee) == "open":
                through = "" if callee == name else f" through @{name}"
                raise Diagnostic(f"@{callee} calls itself{through}: recursive functions cannot be inlined", location_of(call))
            if callee not in state:
                visit(callee)
        state[name] = "done"

    for name in functions:
        if name not in state:
            visit(name)


def inline_calls(module: ModuleOp) -> None:
    """Replace every func.call of a function defined in `module` by the callee's body;
    then erase the private functions nothing calls any more."""
    functions = {fn.sym_name.data: fn for fn in module.ops if isinstance(fn, func.FuncOp)}
    check_no_recursion(functions)
    inlined: set[str] = set()
    while calls := calls_in(module, functions):  # ends: no cycles, so nesting is bounded
        for call in calls:
            inline_call(call, functions[call.callee.string_value()])
            inlined.add(call.callee.string_value())
    for name in inlined:
        fn = functions[name]
        if fn.sym_visibility is not None and fn.sym_visibility.data == "private":
            fn.detach()
            fn.erase()


def inline_call(call: func.CallOp, callee: func.FuncOp) -> None:
    blocks = len(callee.body.blocks)
    if blocks != 1:
        why = "it is only declared" if blocks == 0 else f"it has {blocks} blocks"
        raise Diagnostic(f"cannot inline @{callee.sym_name.data}: {why}", location_of(call))
    block = callee.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, call.arguments))
    parent = call.parent_block()
    assert parent is not None
    for op in block.ops:
        if isinstance(op, func.ReturnOp):
            for old, new in zip(call.results, op.arguments):
                old.replace_all_uses_with(mapping.get(new, new))
            break
        parent.insert_op_before(op.clone(value_mapper=mapping), call)
    call.detach()
    call.erase()


def publish_entry(module: ModuleOp, entry: str) -> None:
    """Make function `entry` of `module` (a compile's own copy) public: it is called from
    outside, and inline would erase a private one once inlined into its callers."""
    from mlfuse.ir import find_function

    find_function(module, entry).sym_visibility = None
