"""Task-head thinc layers that read token vectors from a listener."""
