"""Evaluation suites: cases saved from real turns or imported, replayed against a candidate
(a template version, a model, an embedding model) and a baseline, and compared case by case."""
