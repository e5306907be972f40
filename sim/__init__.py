"""The simulated world (simpy): network, disks, coordination service, clients."""
import os

from broker_core import mutants

mutants.activate_from(os.environ)  # ISRLAB_MUTANT: the core reads no environment (docs/mutants.md)
