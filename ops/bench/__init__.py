"""`toolgate bench`: what the running pipeline does under load, one call at a time, or idle.

* `run.py`: drive N proposals through the pipeline and report calls/s, latency and hops;
* `mcp.py`: the same through the MCP door; `pgceiling.py`: execution's SQL alone;
* `idle.py`: what an idle local stack costs; `cpu.py`: its processes' CPU from /proc;
* `hops.py`: when each call reached each topic; `stats.py`: percentiles and the hop table;
* `machine.py`, `speed.py`, `disk.py`, `tail.py`: what the machine, its speed and its disk did
  while the run went on, and where the slowest calls came from.
"""
