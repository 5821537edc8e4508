"""agentenv-cas-store: a content-addressed object store for agentenv-local, shared by projects.

`[store] objects = "cas"` keeps a project's object bytes (artifact files, trajectories) in a CAS root that
many projects can share: one compressed, verified blob per distinct content. `agentenv cas info|gc` look
after the root.
"""

__version__ = "0.1.0"
