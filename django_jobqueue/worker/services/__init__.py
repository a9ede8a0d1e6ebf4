"""The worker's maintenance services, one per module, driven by ``base.Maintenance``."""
