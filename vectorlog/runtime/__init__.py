"""The processor runtime: the one loop every stateful consumer runs on, and the topology.

The common shape of the consumers (the data node, the query node, datacoord, the index node,
the proxy's ingest consumer; rootcoord folds `ddl` the same way, synchronously):

1. **recover**: load the derived state and the consumed positions from the processor's state
   store (`vectorlog.state`), then read what follows those positions to the log's end (the
   topic's snapshot first where retention deleted records below them);
2. **start**: one thread (`ProcessorLoop`) runs rounds until `stop`;
3. **consume**: a round reads either tick-aligned packs of the dml topic
   (`streams.msgstream.TtMsgStream`: the data node, the query node) or plain records of
   ddl / coord / ingest topics from the committed positions (`RecordSource`: datacoord, the
   index node, the ingest consumer);
4. **apply** each event of a pack or record of a batch, in order;
5. **dead-letter** an event or record that cannot be decoded or applied
   (`streams.deadletter`, at most once per source record, remembered across restarts) and go
   on; a failure that is not the record's (the store, the log, the object store) is retried,
   never dead-lettered (`EventApplier`);
6. **commit** the positions consumed in the same `StateStore` write as the state derived from
   them (the query node keeps no durable state: it rebuilds at every start);
7. after a failed round, go back to the committed positions (`Processor.reset`) and retry
   after a pause; `stop` ends the rounds, joins the thread, then the processor closes what it
   opened.

What each processor supplies is only its own: what it reads (its sources, at its positions),
how it decodes and applies, and what it commits. The topology (`topology.CLUSTER`) says which
processors exist, what each consumes, produces and serves, and which are singletons; a runner
(`vectorlog.runners`) decides where they run.
"""

from vectorlog.runtime.events import EventApplier, decode_or_dead_letter, skip_past
from vectorlog.runtime.loop import Processor, ProcessorLoop
from vectorlog.runtime.sources import RecordSource
from vectorlog.runtime.topology import CLUSTER, ProcessorSpec, Topology

__all__ = [
    "CLUSTER",
    "EventApplier",
    "Processor",
    "ProcessorLoop",
    "ProcessorSpec",
    "RecordSource",
    "Topology",
    "decode_or_dead_letter",
    "skip_past",
]
