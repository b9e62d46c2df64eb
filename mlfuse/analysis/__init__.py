"""Pure, unit-tested analyses behind the passes.

Fusion planning (the `fusion-plan` pass), bottom up:

- `op_classes`: what kind of kernel an op can take part in;
- `fusion_graph`: a function body as numbered nodes with reachability bit masks;
- `cost_model`: per-target modeled time, bytes and stitching of a pattern;
- `candidates`: valid patterns (convex, within limits) and their pruned enumeration;
- `ilp`: the exact-cover ILP without kernel cycles, solved by HiGHS;
- `planners`: the ILP planner and the xla, tvm, greedy and none baselines;
- `rewrite`: a plan as `fusion.group` ops;
- `report`: per-edge explanations, DOT, summary lines;
- `plan_module`: options and the whole-module driver used by the pass.
"""
