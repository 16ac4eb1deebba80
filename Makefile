# vectorlog: `make help` lists the targets.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install run run-kafka test test-all bench lint clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null || { echo "python3.11 is required"; exit 1; }
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,spark,demo,serve,bench]'
	@bash infra/ensure_java.sh
	touch $(STAMP)

install: $(STAMP) ## create .venv and install vectorlog with its dev tools (idempotent)

run: install ## start the embedded default (RocksDB log under ./vectorlog-data) and run the demo
	$(BIN)/python -m vectorlog.demo --uri ./vectorlog-data

run-kafka: install ## run the same demo on the Kafka backend, against the broker from infra/
	$(BIN)/python -m infra.broker --run -- $(BIN)/python -m vectorlog.demo --uri kafka://{bootstrap}

TEST_WORKERS ?= 3

test: install ## run the test suite on both log backends (the broker is started by the fixture)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=25

test-all: install ## the suite plus the slow soak/crash tests
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m ''

bench: install ## benchmarks; results land in benchmarks/results/*.json, with .md pages and .png plots
	$(BIN)/python -m benchmarks.ingest
	$(BIN)/python -m benchmarks.snapshotkv_bench
	$(BIN)/python -m benchmarks.meta_bench
	$(BIN)/python -m benchmarks.binlog_bench
	$(BIN)/python -m benchmarks.flush_bench
	$(BIN)/python -m benchmarks.search_bench
	$(BIN)/python -m benchmarks.search_calls_bench
	$(BIN)/python -m benchmarks.server_bench
	$(BIN)/python -m benchmarks.rpc_bench
	$(BIN)/python -m benchmarks.ingest_topic_bench
	$(BIN)/python -m benchmarks.ingest_topic_stages
	$(BIN)/python -m benchmarks.ingest_topic_threads
	$(BIN)/python -m benchmarks.ingest_worker_stages
	$(BIN)/python -m benchmarks.ingest_fresh_clusters
	$(BIN)/python -m benchmarks.ingest_worker_fresh
	$(BIN)/python -m benchmarks.replay_bench
	$(BIN)/python -m benchmarks.restart_bench
	$(BIN)/python -m benchmarks.bulkload_bench
	$(BIN)/python -m benchmarks.rebuild_bench
	$(BIN)/python -m benchmarks.compaction_bench
	$(BIN)/python -m benchmarks.scalar_index_bench
	$(BIN)/python -m benchmarks.querynode_bench
	$(BIN)/python -m benchmarks.tick_apply_bench
	$(BIN)/python -m benchmarks.tick_apply_bench --node datanode --baseline 81523cb
	$(BIN)/python -m benchmarks.node_apply_ab --baseline 86a9790
	$(BIN)/python -m benchmarks.scaleout_bench
	$(BIN)/python -m benchmarks.scaleout_bench --rows 1000000
	$(BIN)/python -m benchmarks.idle_cluster
	$(BIN)/python -m benchmarks.handoff_ab
	$(BIN)/python -m benchmarks.rpc_counts_bench
	$(BIN)/python -m benchmarks.cluster_bench
	$(BIN)/python -m benchmarks.datanode_onoff_bench
	$(BIN)/python -m benchmarks.failover_bench --dead-after 2
	$(BIN)/python -m benchmarks.datanodes_bench
	$(BIN)/python -m benchmarks.bm25_bench
	$(BIN)/python -m benchmarks.spark_datanode_bench
	$(BIN)/python -m benchmarks.spark_bulk_bench
	$(BIN)/python -m benchmarks.group_commit_bench
	$(BIN)/python -m benchmarks.exactvec_bench
	$(BIN)/python -m benchmarks.wire_vs_milvus
	$(BIN)/python -m benchmarks.wire_floor
	$(BIN)/python -m benchmarks.wire_insert_bench
	$(BIN)/python -m benchmarks.insert_threads
	$(BIN)/python -m benchmarks.hnsw_build_bench
	$(BIN)/python -m benchmarks.filter_bench
	$(BIN)/python -m benchmarks.open_close_bench
	$(BIN)/python -m benchmarks.report

lint: install ## ruff and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy vectorlog infra benchmarks tests examples

clean: ## remove the venv and local data
	rm -rf $(VENV) vectorlog-data .pytest_cache .mypy_cache
