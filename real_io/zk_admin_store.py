"""The admin tools' view of a real ZooKeeper: the five store methods the shared admin
functions use (broker_core/admin_nodes.py, dynamic_config.change_topic_config,
quota_config.change_client_quota), over kazoo in a chroot. The simulation hands the same
functions its CoordinationStore; a real run on ZooKeeper hands them this, so a
scenario's admin steps write the same nodes in both bindings and are written once.

Paths are the core's (``/brokers/ids``...); the chroot (real_io/cluster.py CHROOT, or a
single broker's run chroot) is put in front here, as a ZooKeeper client given
``host:port/chroot`` does. Each call is one blocking kazoo call: the admin tools are
ZooKeeper clients like any other, outside the brokers.
"""
from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

START_TIMEOUT_S = 10.0


class ZkAdminStore:
    """``get`` / ``put`` / ``set_data`` / ``put_sequential`` / ``children`` over
    ``client`` under ``chroot`` (``""`` for none)."""

    def __init__(self, client: KazooClient, chroot: str = "") -> None:
        self.client = client
        self.chroot = chroot.rstrip("/")

    @classmethod
    def connect(cls, hosts: str, chroot: str = "") -> "ZkAdminStore":
        """A store on a client of its own, started (``close`` ends its session)."""
        client = KazooClient(hosts=hosts)
        client.start(timeout=START_TIMEOUT_S)
        return cls(client, chroot)

    def close(self) -> None:
        self.client.stop()
        self.client.close()

    def _path(self, path: str) -> str:
        return self.chroot + path

    def get(self, path: str) -> bytes | None:
        try:
            data, _ = self.client.get(self._path(path))
        except NoNodeError:
            return None
        return data

    def put(self, path: str, data: bytes) -> None:
        """Create the node (and its parents), or set its data where it exists, as the
        admin tools' ``createOrSet`` does (2.7.0 KafkaZkClient.setOrCreateEntityConfigs)."""
        try:
            self.client.create(self._path(path), data, makepath=True)
        except NodeExistsError:
            self.client.set(self._path(path), data)

    def set_data(self, path: str, data: bytes) -> None:
        """ZooKeeper fires the node's data watches on every set: ``put`` already does
        what the simulated store's ``set_data`` adds to its silent ``put``."""
        self.put(path, data)

    def put_sequential(self, prefix: str, data: bytes) -> str:
        """A persistent sequential node; its path without the chroot."""
        created = self.client.create(self._path(prefix), data, sequence=True, makepath=True)
        return created[len(self.chroot):]

    def children(self, path: str) -> list[str]:
        try:
            return sorted(self.client.get_children(self._path(path)))
        except NoNodeError:
            return []
