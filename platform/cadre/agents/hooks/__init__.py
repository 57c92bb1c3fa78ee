"""Hooks: six named points, per-template ordered lists, each hook enabled or disabled."""
