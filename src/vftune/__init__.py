"""vftune: interrupt moderation tuning for SR-IOV VFs on KVM hosts."""

__version__ = "0.1.0"
