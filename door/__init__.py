"""The MCP front door: toolgate as a Model Context Protocol server.

Its tools are the admitted contracts (`tools.py`); every `tools/call` is a signed proposal through
every gate, answered by its observation (`results.py`); `calls.py` says what a call proposes (the
operation id a retry carries in `_meta`), `session.py` does the waiting, `server.py` serves it over
stdio and Streamable HTTP (a bearer token per agent, `ops/agent_tokens.py`). A held call is a
task for a client that declares the MCP Tasks extension (`tasks.py` its shapes, `task_door.py`
tasks/get, tasks/cancel, tasks/result).
"""
