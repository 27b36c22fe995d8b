"""Offline use, no cluster: policies, objects and referenced objects come from files."""
