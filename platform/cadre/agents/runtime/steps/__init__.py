"""The runtime's steps floor: the execution context and each kind of step the engine takes
(context assembly, the model call, a tool call, a delegation)."""
