"""Episodes as trainers take them: a finished run as one flat record (ids, reward, per-criterion scores, the
conversation as OpenAI-style messages, the trajectory, usage, timings), and its export to JSONL or Parquet.

`record.py` builds the record from a run, `messages.py` turns an agent's trajectory into chat messages,
`export.py` picks runs and writes the files. Nothing is imported at package import.
"""
