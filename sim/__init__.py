"""The simulated world (simpy): network, disks, coordination service, clients."""
