"""Wiring only: builds and supervises the long-running parts of `kinitiras-py serve`."""
