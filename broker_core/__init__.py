"""The deterministic, sans-I/O broker core of isrlab.

A runtime (``sim`` or ``real_io``) drives a :class:`broker_core.broker.BrokerNode` by
handing it one input at a time with the current time in milliseconds; the node answers
with a list of effects for the runtime to carry out. Nothing in this package touches a
socket, a file, a clock, a thread or a global random generator.
"""
