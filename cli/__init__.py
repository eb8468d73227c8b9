"""The `toolgate` command: the front end above everything else.

One module per command group; `main.py` assembles them into the `toolgate` app. The commands
parse options, call `toolgate.ops` (operator work) or `toolgate.client` (the agents'
verbs), and print; they never reach into `toolgate.workers`.
"""
