"""OpenTelemetry spans and metrics, and structured logs.

One trace per tool call: the agent's client starts it (W3C traceparent in the proposal's
headers); every stage opens a span per call as a child of the traceparent it received and
hands its own span's traceparent to the next stage inside the StageRecord.

* `setup.py`: a process's tracer and meter providers and their exporters;
* `call_spans.py`: the spans of a round's calls, made without the SDK's per-span cost;
* `json_lines.py`: spans as JSON lines in a file (the embedded default);
* `metrics_export.py`: `/metrics` for Prometheus, and the views of every histogram;
* `traceparent.py`: reading a record's W3C traceparent;
* `logs.py`: structured logs.

Secrets: log records and spans pass through the scrubber (toolgate/scrubber.py), with every
secret value registered there.
"""
