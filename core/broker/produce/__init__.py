"""A produce request's records become batches: ``partitioner`` picks each record's
partition as Kafka's Java producer does, ``producer`` groups and encodes them and
collects one result per record."""
