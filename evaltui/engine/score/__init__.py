"""Scoring one model×dataset from its files: here, in a worker thread, or in a process of its own.

The watch-scorer (engine/run/scorer.py) decides when a pair is ready; this package scores it.
"""
