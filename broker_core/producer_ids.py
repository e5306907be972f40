"""InitProducerId for idempotent producers: producer ids handed out from blocks that
brokers reserve in the coordination store, so no two brokers (nor two incarnations of
one) ever hand out the same id.

Follows Kafka 2.7.0 core/src/main/scala/kafka/coordinator/transaction/
ProducerIdManager.scala (getNewProducerIdBlock: read /latest_producer_id_block, write the
next block of 1000 with a version check, retry on a conflict; generateProducerId) and
TransactionCoordinator.handleInitProducerId for a producer without a transactional id
(a new producer id, epoch 0). Kafka reserves its first block when the broker starts;
isrlab reserves it at the first request, so runs without idempotent producers send the
coordination store nothing new.
"""
from __future__ import annotations

from typing import Hashable

from broker_core import coordination as coord
from broker_core.context import NodeContext
from broker_core.errors import ErrorCode
from broker_core.messages import InitProducerIdRequest, InitProducerIdResponse

PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
PRODUCER_ID_BLOCK_SIZE = 1000  # ProducerIdManager.PidBlockSize


class ProducerIdManager:
    def __init__(self, ctx: NodeContext):
        self.ctx = ctx
        self.next_producer_id = -1
        self.block_end = -2  # inclusive; nothing reserved yet
        self._waiting: list[tuple[Hashable, int]] = []  # (src, correlation id)
        self._reserving = False

    def handle_init_producer_id(self, src: Hashable, request: InitProducerIdRequest) -> None:
        if request.transactional_id is not None:
            # Transactions are not modelled: a transactional producer is refused.
            self.ctx.send(src, InitProducerIdResponse(request.correlation_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        self._waiting.append((src, request.correlation_id))
        self._answer_waiting()

    def _answer_waiting(self) -> None:
        while self._waiting:
            if self.next_producer_id > self.block_end:
                if not self._reserving:
                    self.ctx.tasks.start(self._reserve_block())
                return
            src, correlation_id = self._waiting.pop(0)
            producer_id = self.next_producer_id
            self.next_producer_id += 1
            self.ctx.trace("producer_id_assigned", producer_id=producer_id, producer_epoch=0, client=str(src))
            self.ctx.send(src, InitProducerIdResponse(correlation_id, ErrorCode.NONE, producer_id, 0))

    def _reserve_block(self):
        """Write the block after the latest one, conditional on the version read; a
        conflict means another broker took it: read again."""
        self._reserving = True
        try:
            while True:
                current = yield coord.GetData(PRODUCER_ID_BLOCK_PATH)
                if current.ok and current.data:
                    start = int(current.value["block_end"]) + 1
                elif current.ok:  # the empty node createTopLevelPaths makes: no block yet
                    start = 0
                else:
                    if current.error != coord.NO_NODE:
                        return  # no session: requests wait, the clients time out and retry
                    start = 0
                end = start + PRODUCER_ID_BLOCK_SIZE - 1
                data = coord.encode_data({"version": 1, "broker": self.ctx.broker_id,
                                          "block_start": str(start), "block_end": str(end)})
                if current.ok:
                    written = yield coord.SetData(PRODUCER_ID_BLOCK_PATH, data, current.version)
                else:
                    written = yield coord.Create(PRODUCER_ID_BLOCK_PATH, data)
                if written.ok:
                    self.ctx.trace("producer_id_block_reserved", block_start=start, block_end=end)
                    self.next_producer_id, self.block_end = start, end
                    break
                if written.error not in (coord.BAD_VERSION, coord.NODE_EXISTS):
                    return
        finally:
            self._reserving = False
        self._answer_waiting()
