"""The real binding: the core on the Kafka wire protocol, real files and ZooKeeper."""
