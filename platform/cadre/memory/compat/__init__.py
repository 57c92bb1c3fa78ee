"""Memory APIs other clients already speak (Mem0's platform API), served on memory's services."""
