"""An agent that connects as it starts (`ToolgateClient.connect`) makes then what its first call
would otherwise make in its own time: the records' codec, the producer of proposals, the tenant's
observation feed."""

from __future__ import annotations

from tests.conftest import Pipeline
from toolgate.client import ToolgateClient
from toolgate.kafka_security import agent_role
from toolgate.trust.agent_keys import AgentKeyring


def test_a_connected_client_holds_its_producer_and_feed_before_its_first_call(pipeline: Pipeline) -> None:
    runtime = pipeline.runtime
    client = ToolgateClient(
        runtime["kafka_bootstrap"],
        client_id="pytest-connect",
        keyring=AgentKeyring(pipeline.home / "agents"),
        deployment_public_key=bytes.fromhex(runtime["deployment_public_key"]),
        kafka_config=pipeline.kafka(agent_role("cli")),  # as the agent it proposes for, secured
    )
    try:
        assert client._producers.made() == [] and not client._feeds
        client.connect("acme")
        (producer,) = client._producers.made()
        feed = client._feeds["acme"]
        proposed = client.propose(
            "invoice.fetch", {"invoice_id": "inv_acme0001"}, agent_id="cli", user_id="u_connect", watch=True
        )
        # The call went out on the producer and is heard on the feed that `connect` made.
        assert client._producers.made() == [producer] and client._feeds["acme"] is feed
        seen = client.wait(proposed, timeout=60)
        assert not seen.observation.status.is_error
    finally:
        client.close()
