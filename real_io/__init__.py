"""The real binding: Kafka wire protocol, files and ZooKeeper (step 6 and 7)."""
