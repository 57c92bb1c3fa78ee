"""The masking engine: detects sensitive data and masks, redacts or pseudonymizes it."""
