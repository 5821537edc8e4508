"""Replay a recorded run against the current (or a given) env version, and compare any two runs.

- `record.py`: what a recorded run holds, read into one comparable view (tool calls, env calls, criteria);
- `agents.py`: the replay agents' plans (the scripted agent fed the recorded calls and replies);
- `task.py`: the replay task (the recorded task with every agent swapped for its replay agent);
- `compare.py`: the differences between two views, down to the path that differs;
- `replay.py`: runs the replays and turns the comparison into a report.
"""
