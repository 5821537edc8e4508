"""Where runs execute: in the hub (the default, `local`), or on a Ray cluster (`ray`).

`ray_mailbox.py` is the one channel between the hub and its Ray workers: an actor that carries the workers'
store calls to the hub and the hub's answers and cancel requests back, so no port is opened for it.
`ray_bridge.py` is the hub's end (a thread that answers the calls through `Hub.call`, with each object's
bytes put into Ray's object store once). Ray is imported only when the executor is `ray` (the
`agentenv-local[ray]` extra).
"""
