"""demo_setup, doctor and encryption_rotate."""
