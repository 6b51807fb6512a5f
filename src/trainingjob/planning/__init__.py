"""The plan vocabulary every planner and the controller kit share: what a planner asks the apply layer to do
(`actions`), the Events it records, and the `Plan` it answers with (`plan`).

Plain data on the ground floor: it imports nothing of the operator's, so the kit (operator/runtime/) records an
Event and the planners (reconcile/, serving/, sweeps/) build Plans without any of them importing another.
"""
