"""Directory stage: platforms' contact directories, the directory sync, bulk identity import."""
