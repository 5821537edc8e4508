"""Agents the hub runs: for a run's `deploy_agent` steps and `agentenv agent serve` (hosted.py: in the hub, as a
subprocess, in a sandbox container, or at a URL), and the hub's long-lived instances (`agentenv agent deploy`,
recorded in the `agent_instances` records: instances.py).

Writing agents, the built-in ones, agent records and the A2A client stay in the agent SDK,
`agentenv_local.agents`; this package only starts and stops them.
"""
