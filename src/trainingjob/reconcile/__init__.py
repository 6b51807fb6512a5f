"""The brain: a pure planner from (job, observed children, now) to (actions, status), and its helpers."""
