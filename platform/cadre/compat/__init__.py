"""The memory APIs other clients speak: Mem0 at /mem0/, MemOS at /memos/."""
