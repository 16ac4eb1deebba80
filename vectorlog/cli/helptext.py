"""What `vectorlog <command> --help` says: a one-line summary, a description and an example
per subcommand."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Help:
    """A subcommand's summary (in `vectorlog --help`), description and example."""

    summary: str
    description: str
    example: str


COMMANDS: dict[str, Help] = {
    "demo": Help(
        "run the demo on real vectors",
        "Creates a collection, inserts real vectors, searches them and prints the answers.",
        "vectorlog demo --uri ./demo-data",
    ),
    "collections": Help(
        "list collections and row counts",
        "Lists each collection with its id, shard count and row count (the rows visible now). "
        "While a running server holds the data dir it reads the server's state read-only: "
        "rows are then those in segments, deletes not subtracted (as Milvus counts them).",
        "vectorlog collections --uri ./vectorlog-data",
    ),
    "dead-letters": Help(
        "print each dead letter once (reads, never writes)",
        "Prints each record a processor could not apply, once, as a JSON line: its reason, "
        "the processor, the source topic/partition/offset and its bytes. Reads only: it runs "
        "while a server holds the data dir.",
        "vectorlog dead-letters --uri ./vectorlog-data --processor proxy-ingest",
    ),
    "replay": Help(
        "write a topic's events as JSON lines, Parquet or Avro",
        "Writes the events of a topic (dml, ddl, coord...) from an offset or a time, filtered "
        "by collection and event type, to a file, stdout or another topic. Reading runs while "
        "a server holds the data dir; appending to that same log does not.",
        "vectorlog replay --uri ./vectorlog-data --collection books --from-ts 2024-05-01T00:00",
    ),
    "serve": Help(
        "serve Milvus's gRPC (19530) and REST v2 (19531) APIs",
        "Serves an unmodified pymilvus (gRPC) and Milvus's REST v2 over one cluster until "
        "SIGTERM or Ctrl-C, with an access log on stderr and /metrics for Prometheus.",
        "vectorlog serve --dir ./vectorlog-data --token root:Milvus --log-level info",
    ),
    "ingest": Help(
        "append JSON lines or Parquet rows to the ingest topic",
        "Checks every row of a JSON lines or Parquet file against the collection's schema, "
        "then appends them to the ingest topic; the running cluster's proxy upserts them into "
        "the collection. Bad lines are reported with their numbers and nothing is sent, unless "
        "--skip-bad sends the others.",
        "vectorlog ingest rows.jsonl --uri kafka://localhost:9092 --collection books",
    ),
    "import": Help(
        "bulk insert Parquet, JSON or NumPy files (Spark job)",
        "Bulk inserts files in Milvus's formats as flushed segments through a Spark job; "
        "prints the task's final state as JSON. It opens the cluster itself.",
        "vectorlog import rows.parquet --uri ./vectorlog-data --collection books",
    ),
    "rebuild": Help(
        "a new data dir holding the cluster as of a timestamp (Spark)",
        "Writes a new embedded data dir holding the cluster as it was at a hybrid timestamp "
        "(default: now), from the log and the binlogs its events point to.",
        "vectorlog rebuild --uri ./vectorlog-data --to ./restored --as-of 449934201763954688",
    ),
    "run": Help(
        "run one role of the cluster mode as this process (on Kafka)",
        "Runs one role (rootcoord, datacoord, querynode, datanode, indexnode or proxy) as "
        "this process, on Kafka, with a storage root every process sees and this process's "
        "own state directory; other roles' RPCs are given by --rootcoord and --datacoord "
        "(any number of query nodes report themselves on the log, and the query coordinator "
        "in the datacoord process assigns them the dml channels). A proxy serves pymilvus "
        "and REST v2 as `vectorlog serve` does. Each "
        "process logs its lifecycle and serves /healthz and /metrics on --metrics-port.",
        "vectorlog run querynode --log kafka://localhost:9092 --storage /shared/vl "
        "--state-dir ./qn --rpc-port 19600 --rootcoord 10.0.0.1:19601",
    ),
    "cluster": Help(
        "run every process of the cluster mode on this machine (`cluster up`)",
        "Starts one `vectorlog run` child per process (rootcoord, datacoord with the query "
        "coordinator, --querynodes query nodes, the data node, the index node, --proxies "
        "proxies on consecutive ports from --port), prints where each listens, restarts a "
        "child that dies (after a backoff, saying so), and stops them all on Ctrl-C or "
        "SIGTERM. Each child's state is DIR/<name> and its log DIR/<name>.log.",
        "vectorlog cluster up --log kafka://localhost:9092 --storage /shared/vl --dir ./vl "
        "--proxies 2 --querynodes 2",
    ),
}


def epilog(name: str) -> str:
    """Returns the example paragraph of `name`'s help."""
    return f"example:\n  {COMMANDS[name].example}"
