"""The hub: the one process that owns a project's store (DESIGN.md section 3).

`connect()` gives a Session: if no hub runs, this process becomes the hub for its lifetime;
otherwise it talks to the running hub over the unix socket in the state dir. `HubMethods(session)`
calls the hub's own methods (runs, env and agent instances), typed.
"""

from .methods import HubMethods
from .session import Session, connect, hub_status

__all__ = ["HubMethods", "Session", "connect", "hub_status"]
