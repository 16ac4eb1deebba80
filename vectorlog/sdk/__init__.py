"""The in-process SDK: `Client`, MilvusClient-style."""
