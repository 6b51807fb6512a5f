"""What only the operator can judge in a sweep's spec (the API server checks the rest, api/schema_sweep.py): it
ends the sweep Failed with reason InvalidSpec and the message here, before any trial is created.

`values` holds strings, numbers and booleans, which the schema leaves untyped, so CEL cannot look into it.
"""

from __future__ import annotations

from trainingjob.sweeps.types import TrainingSweep

MAX_GRID_POINTS = 100_000  # a grid this large is no grid search a sweep of at most 1000 trials can cover


def spec_problems(sweep: TrainingSweep) -> list[str]:
    problems = []
    for parameter in sweep.spec.parameters:
        if parameter.type == "categorical" and not parameter.choices:
            problems.append(f"parameter {parameter.name}: a categorical parameter needs values")
        if parameter.type != "categorical" and parameter.choices:
            problems.append(f"parameter {parameter.name}: a {parameter.type} range takes min and max, not values")
        if len({repr(choice) for choice in parameter.choices}) < len(parameter.choices):
            problems.append(f"parameter {parameter.name}: values must be distinct")
    if sweep.spec.algorithm.name == "grid" and not problems and grid_points(sweep) > MAX_GRID_POINTS:
        problems.append(f"the grid has more than {MAX_GRID_POINTS} points: give coarser steps")
    return problems


def grid_points(sweep: TrainingSweep) -> int:
    count = 1
    for parameter in sweep.spec.parameters:
        if parameter.type == "categorical":
            count *= len(parameter.choices)
        else:
            span = float(parameter.high or 0) - float(parameter.low or 0)
            count *= int(span / float(parameter.step or 1) + 1e-9) + 1
    return count
