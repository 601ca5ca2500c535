"""Ray wiring for Strata: thin actor wrappers around plain classes in ``strata``."""
