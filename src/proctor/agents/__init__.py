"""Agents: tools, environments (documents, database, a user's tools), workflows (ReAct, PAL, DFSDT,
native function calling) with per-item guards and stored traces, and the sandbox for generated code.

A workflow answers one question with an LLM acting through an environment's tools and returns a
`Trajectory`: every step (thought, action, arguments, observation, tokens, latency) and a typed stop
reason. Steps are journaled in the run store, so a resumed run continues a trajectory from its last
completed step without repeating a paid call.
"""
