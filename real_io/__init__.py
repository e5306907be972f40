"""The real binding: the core on the Kafka wire protocol, real files and ZooKeeper."""
import os

from broker_core import mutants

mutants.activate_from(os.environ)  # ISRLAB_MUTANT: the core reads no environment (docs/mutants.md)
