"""agentenv-verifier-steps: two task steps for agentenv-local, registered in `agentenv_local.task_steps`.

- `http_probe_verifier` (http_probe.py): probe an HTTP endpoint a task deployed, with retries, and score it;
- `sql_state_verifier` (sql_state.py): SELECT queries over a sandbox's SQLite file or an env's data-plane state.

Importing the package imports neither step; agentenv loads each through its entry point when a task uses it.
"""

__version__ = "0.1.0"
