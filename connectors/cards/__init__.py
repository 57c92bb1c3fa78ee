"""Cards stage: confirmation cards (signed single-use decision tokens) and skill proposal cards."""
