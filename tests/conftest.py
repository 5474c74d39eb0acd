"""What every test process shares.

``franz serve`` opens Kafka's ``PLAINTEXT://127.0.0.1:9092`` by default. Tests start many
brokers, often at once, so every process they start has the Kafka door off unless the
test asks for it (``--override kafka.listeners=PLAINTEXT://127.0.0.1:<free port>``,
which beats this environment variable): no test depends on port 9092 being free.
"""

import os

os.environ.setdefault("FRANZ_KAFKA_LISTENERS", "")
