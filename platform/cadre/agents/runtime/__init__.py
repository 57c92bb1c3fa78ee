"""The agent runtime: step-persisting, resumable run execution, context assembly, waits."""
