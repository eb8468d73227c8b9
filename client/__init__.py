"""toolgate's client library, for agents and approval services: typed proposals signed as the
agent, observations checked against the deployment's signature, confirmation packets read and
signed decisions published (confluent-kafka).

    from toolgate import ToolgateClient
    client = ToolgateClient.from_settings()
    sent = client.propose("invoice.fetch", {"invoice_id": "inv_acme0001"},
                          agent_id="billing-agent", user_id="u1")
    obs = client.wait(sent)            # the final Observation of that call

* `agent.py`: `ToolgateClient`, proposing, publishing and waiting (its docstring tells how);
* `approvals.py`: `ApprovalClient`, for approval services;
* `observing.py`: reading a tenant's observations; `feed.py`: the one feed a waiting call is
  answered from;
* `resend.py`: when an unanswered call is published again;
* `edge.py`: the producers, consumers and signature check both clients share;
* `calls.py`: the records a client keeps of what it proposed and heard.
"""

from toolgate.client.agent import ToolgateClient
from toolgate.client.approvals import ApprovalClient
from toolgate.client.calls import Draft, Observed, Proposed

__all__ = ["ApprovalClient", "Draft", "Observed", "Proposed", "ToolgateClient"]
