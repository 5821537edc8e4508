"""Tasks as DAGs of typed steps: models, validation, the runner and its journal."""
