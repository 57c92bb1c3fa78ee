"""Console views, one module per area; thin adapters over services and restricted querysets."""
