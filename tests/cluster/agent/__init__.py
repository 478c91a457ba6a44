"""The node agent: fake nodes that run their pods as local processes (see tests/cluster/README.md)."""
