"""Control logic: the ITR tuner and the PF mode controller as small ask/tell machines.

Pure: each part gets samples and returns decisions; none reads a clock, a file or a socket,
so the agent's tick loop (vftune.agent), the simulator and the bench drive the same code.
tests/test_layers.py holds the package to that.
"""
