"""Data shipped with dtrain: the VM price snapshot and its source (read by prices.py)."""
