"""The runtime's lowest floor: progress records and events, loading and tracing a run, what it
is charged to, grants, delivery channels — what every floor above (and hooks and tools) uses."""
