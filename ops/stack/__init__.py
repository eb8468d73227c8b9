"""The local stack `toolgate up` runs and supervises: the broker (the embedded Tansu, or Apache
Kafka's nodes), Postgres, the demo provider and every stage worker.

* `up.py`: `toolgate up`, the supervisor;
* `embedded.py`: the embedded Tansu broker and Postgres;
* `kafka_dist.py`, `kafka_classes.py`, `kafka_broker.py`, `kafka_tls.py`: Apache Kafka fetched
  from Maven Central, its classes archived, its KRaft nodes run, their certificates;
* `provider.py`: the demo email and payment service; `priority.py`: the stages' nice values.
"""
