"""The policies vftune is benchmarked against, one module per peer.

The registry of every policy the benchmark can run (vftune, the peers, and the oracle) is
vftune.bench.registry; this package holds the peers' code.
"""
