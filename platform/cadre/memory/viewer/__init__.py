"""The Memory Viewer's read paths: timeline, heatmap, quality figures, trail and vector map."""
